"""End to end: worker processes on the Redis frontier, results in PostgreSQL, pages in WARC.

Each test owns a Redis job (keys deleted afterwards) and a PostgreSQL schema (dropped
afterwards), or a private PostgreSQL server that it stops and starts. Workers are real
``crawlq worker`` processes crawling the PostgreSQL manual served on loopback.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.testing import RequestLog, ServerThread, make_static_app
from tests.conftest import corpus_tarball, run_crawlq
from tests.e2e.sitemap import reachable
from tests.services import PrivatePostgres

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("warcio")

from psycopg import sql  # noqa: E402

pytestmark = pytest.mark.e2e

WARCIO = shutil.which("warcio", path=os.path.dirname(sys.executable)) or "warcio"


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    name = f"crawlq_test_{secrets.token_hex(6)}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def site(site_root: Path) -> Iterator[tuple[str, set[str]]]:
    with ServerThread(make_static_app(site_root)) as server:
        base = server.base_url + "/"
        expected, missing = reachable(site_root, base)
        if corpus_tarball() is not None:
            assert (len(expected), len(missing)) == (1169, 0)  # the PostgreSQL 15 manual
        yield base, expected | missing


def in_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def seed(
    redis_url: str,
    job: str,
    store: str,
    base: str,
    warc: Path,
    host_concurrency: int = 16,
    more: tuple[str, ...] = (),
) -> None:
    """Create the job: its store, its WARC directory, and leases that a killed worker's
    workers get back after 3 s (live workers renew theirs every second)."""
    config = warc.parent / "job.toml"
    config.write_text("visibility_timeout_s = 3.0\n")
    run_crawlq(
        "seed", base + "index.html", "--frontier", redis_url, "--job", job, "--store", store,
        "--delay", "0", "--host-concurrency", str(host_concurrency), "--warc", str(warc),
        "--warc-max-size", "1MiB", "--config", str(config), *more,
    )  # fmt: skip


def worker(
    redis_url: str, job: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "crawlq", "worker", "--frontier", redis_url, "--job", job, "-q"]
    # These workers run on the producer's machine, so the job's WARC directory is theirs too.
    cmd.append("--trust-job-code")
    return subprocess.Popen(
        [*cmd, *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


def finish(procs: list[subprocess.Popen[bytes]], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        _, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        assert proc.returncode == 0, err.decode(errors="replace")


def pages(store: str, schema: str | None = None) -> list[tuple[str, bytes, str | None, int]]:
    """``(url, fingerprint, warc_file, warc_offset)`` of every stored page."""
    with psycopg.connect(store, connect_timeout=2) as conn:
        if schema is not None:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        cur = conn.execute("SELECT url, fingerprint, warc_file, warc_offset FROM pages")
        return [(url, bytes(fp), file, offset) for url, fp, file, offset in cur.fetchall()]


def page_count(store: str) -> int:
    try:
        with psycopg.connect(store, connect_timeout=2) as conn:
            row = conn.execute("SELECT count(*) FROM pages").fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:  # not created yet, or the server is down
        return 0


def responses(warc: Path) -> list[tuple[str, int, str]]:
    """``(file, offset, target URI)`` of every response record, checked by ``warcio check``."""
    files = sorted(warc.iterdir())
    assert files and not [f for f in files if not f.name.endswith(".warc.gz")], files
    check = subprocess.run(
        [WARCIO, "check", *map(str, files)], capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stdout + check.stderr
    found = []
    for path in files:
        done = subprocess.run(
            [WARCIO, "index", "-f", "warc-type,warc-target-uri,offset", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        for line in done.stdout.splitlines():
            record = json.loads(line)
            if record["warc-type"] == "response":
                found.append((path.name, int(record["offset"]), record["warc-target-uri"]))
    return found


def assert_every_page_once(rows: list[tuple[str, bytes, str | None, int]], urls: set[str]) -> None:
    counts = Counter(url for url, *_ in rows)
    assert [u for u, n in counts.items() if n > 1] == []
    assert set(counts) == urls
    assert len({fp for _, fp, *_ in rows}) == len(rows) == len(urls)


def test_two_workers_write_postgresql_and_one_response_record_per_page(
    redis_url: str, postgres_url: str, job: str, schema: str, site, tmp_path: Path
) -> None:
    base, urls = site
    store, warc = in_schema(postgres_url, schema), tmp_path / "warc"
    seed(redis_url, job, store, base, warc)
    procs = [worker(redis_url, job, "--exit-when-done") for _ in range(2)]
    pids = {str(proc.pid) for proc in procs}
    finish(procs)

    rows = pages(postgres_url, schema)
    assert_every_page_once(rows, urls)
    archived = responses(warc)
    assert len(archived) == len(rows)  # exactly one response record per stored page
    by_location = {(file, offset): uri for file, offset, uri in archived}
    assert {(file, offset) for _, _, file, offset in rows} == set(by_location)
    # (a page without a WARC file, None, is a KeyError here, as it should be)
    assert all(by_location[(file, offset)] == url for url, _, file, offset in rows)  # type: ignore[index]
    writers = {name.rsplit("-", 2)[1] for name, _ in by_location}
    # One file series per worker process, named by its pid. Both usually write; on a loaded
    # machine the first can drain the site before the second leases anything, so "both" would
    # be a timing assumption: every series is one of theirs, and none is shared.
    assert writers and writers <= pids
    assert len({name for name, _ in by_location}) > 2  # rotated at 1 MiB


@pytest.mark.timeout(180)
def test_a_worker_killed_mid_crawl_and_restarted_stores_every_page_once(
    redis_url: str, postgres_url: str, job: str, schema: str, site, tmp_path: Path
) -> None:
    base, urls = site
    store, warc = in_schema(postgres_url, schema), tmp_path / "warc"
    seed(redis_url, job, store, base, warc)
    # Small flushes, often: a SIGKILL at a random moment is likely to land inside one.
    small = {"CRAWLQ_FLUSH_MAX_ITEMS": "8"}
    victim = worker(redis_url, job, env=small)
    other = worker(redis_url, job, "--exit-when-done", env=small)
    deadline = time.monotonic() + 60
    while page_count(store) < 0.3 * len(urls):
        assert time.monotonic() < deadline, "no progress"
        assert victim.poll() is None and other.poll() is None, "a worker exited"
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=10)
    assert list(warc.glob("*.open")), "the killed worker left its file open"
    restarted = worker(redis_url, job, "--exit-when-done")
    finish([other, restarted])

    rows = pages(postgres_url, schema)
    assert_every_page_once(rows, urls)
    assert not list(warc.glob("*.open"))  # the restarted worker closed the dead one's file
    archived: dict[tuple[str | None, int], str] = {
        (file, offset): uri for file, offset, uri in responses(warc)
    }
    assert len(archived) >= len(rows)  # pages fetched twice have an extra, unreferenced record
    assert all(archived.get((file, offset)) == url for url, _, file, offset in rows)


@pytest.mark.timeout(180)
def test_postgresql_down_mid_crawl_every_page_is_stored_once(
    redis_url: str, job: str, site_root: Path, site, tmp_path: Path
) -> None:
    _, urls = site
    log = RequestLog()
    server = PrivatePostgres()
    try:
        server.init()
        server.start()
        with ServerThread(make_static_app(site_root, log=log)) as http:
            base = http.base_url + "/"
            urls = {url.replace(site[0], base, 1) for url in urls}
            store, warc = in_schema(server.url, "crawlq"), tmp_path / "warc"
            # Every page queued from the start and no politeness limit that unacked leases
            # could hit: only the worker's own rule (lease nothing while the store is down)
            # can stop the fetching.
            everything = tuple(sorted(urls))
            seed(redis_url, job, store, base, warc, host_concurrency=1000, more=everything)
            procs = [worker(redis_url, job, "--exit-when-done") for _ in range(2)]
            deadline = time.monotonic() + 60
            while page_count(store) < 0.25 * len(urls):
                assert time.monotonic() < deadline, "no progress"
                assert all(p.poll() is None for p in procs), "a worker exited"
                time.sleep(0.01)
            assert page_count(store) < len(urls)  # mid-crawl
            server.stop()
            time.sleep(1)  # the fetches under way finish; their results wait in the workers
            fetched = log.count()
            time.sleep(2)
            assert log.count() == fetched  # no new work is leased while the store is down
            assert all(p.poll() is None for p in procs), "a worker gave up during the outage"
            assert page_count(store) == 0  # the server really is down
            server.start()
            finish(procs, 120)
        rows = pages(store)
    finally:
        server.cleanup()
    assert_every_page_once(rows, urls)
    archived: dict[tuple[str | None, int], str] = {
        (file, offset): uri for file, offset, uri in responses(warc)
    }
    assert all(archived.get((file, offset)) == url for url, _, file, offset in rows)


def test_an_embedded_crawl_keeps_bodies_only_when_asked(tmp_path: Path) -> None:
    import base64

    from crawlq.testing.static import generate_site

    root = generate_site(tmp_path / "site", n_pages=30)
    with_body, without = tmp_path / "with.db", tmp_path / "without.db"
    with ServerThread(make_static_app(root)) as server:
        seed_url = server.base_url + "/index.html"
        fast = ["--delay", "0", "--host-concurrency", "8", "-q"]
        run_crawlq("crawl", seed_url, "--store", str(with_body), "--store-body", *fast)
        run_crawlq("crawl", seed_url, "--store", str(without), "--warc", str(tmp_path / "w"), *fast)
        prefix = server.base_url + "/"

    def exported(store: Path) -> list[dict]:
        out = run_crawlq("export", "--store", str(store), "--body").stdout
        return [json.loads(line) for line in out.splitlines()]

    kept = exported(with_body)
    assert len(kept) == 30
    for row in kept:
        on_disk = (root / row["url"].removeprefix(prefix)).read_bytes()
        assert base64.b64decode(row["body_b64"]) == on_disk
        assert (row["warc_file"], row["warc_offset"]) == (None, None)
    plain = run_crawlq("export", "--store", str(with_body)).stdout
    assert "body_b64" not in plain

    archived = exported(without)
    assert len(archived) == 30 and all(row["body_b64"] is None for row in archived)
    located = {(row["warc_file"], row["warc_offset"]): row["url"] for row in archived}
    assert {(f, o): u for f, o, u in responses(tmp_path / "w")} == located
