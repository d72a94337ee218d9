"""End to end on the Redis frontier: many worker processes, one crawl.

Every test uses its own job name and deletes the job's keys afterwards. Workers run as real
``crawlq worker`` processes; servers are loopback HTTP servers started by the test.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import pytest
import redis
from aiohttp import web

from crawlq.frontier.redis import Keyspace
from crawlq.testing.request_log import RequestLog
from crawlq.testing.static import generate_site, make_static_app
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.e2e.sitemap import reachable
from tests.services import RedisServer

pytestmark = pytest.mark.e2e

JITTER_S = 0.25
"""The frontier spaces lease starts exactly; the server sees request starts that also carry
each worker's lease-to-send latency and this test server thread's own scheduling (GIL): tens
of milliseconds when four worker processes share a 2-core machine, and 0.15 s was seen at a
load average of 5. The pace is checked over every run of requests
(`RequestLog.pace_violations`): one late send may shorten one gap by this much, never the pace
of the crawl: over 30 requests at 0.2 s a delay of 0.15 s is still 1.2 s short."""


def worker_proc(
    frontier: str, job: str, *extra: str, store: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A ``crawlq worker`` process; it names the job's store itself (never taken from Redis)."""
    cmd = [sys.executable, "-m", "crawlq", "worker", "--frontier", frontier, "--job", job]
    cmd += ["--store", str(store)]
    return subprocess.Popen(
        [*cmd, "-q", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def stored_urls(store: Path) -> Counter[str]:
    out = run_crawlq("export", "--store", str(store), "--what", "pages").stdout
    return Counter(json.loads(line)["url"] for line in out.splitlines() if line)


def seed_one(
    frontier: str, job: str, store: Path, *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Seed ``job`` with one URL nothing answers (port 9): a job to inspect, not to crawl."""
    return run_crawlq(
        "seed", "http://127.0.0.1:9/a", "--frontier", frontier, "--job", job,
        "--store", str(store), check=check,
    )  # fmt: skip


def stored_count(store: Path) -> int:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("SELECT count(*) FROM pages").fetchone()[0])
    except sqlite3.Error:
        return 0


def status(frontier: str, job: str) -> dict:
    return json.loads(run_crawlq("status", "--frontier", frontier, "--job", job, "--json").stdout)


def wait_all(procs: list[subprocess.Popen[bytes]], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    return [p.returncode for p in procs]


def test_politeness_holds_across_four_worker_processes(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=30)
    log = RequestLog()
    with ServerThread(make_static_app(root, log=log)) as server:
        store = tmp_path / "store.db"
        run_crawlq(
            "seed", server.base_url + "/index.html", "--frontier", redis_url, "--job", job,
            "--store", str(store), "--delay", "0.2", "--host-concurrency", "1",
        )  # fmt: skip
        procs = [worker_proc(redis_url, job, "--exit-when-done", store=store) for _ in range(4)]
        assert wait_all(procs, 90) == [0, 0, 0, 0]
        host = f"127.0.0.1:{server.port}"
        requests = log.requests(host=host)
        expected, missing = reachable(root, server.base_url + "/")
    assert sum(stored_urls(store).values()) == len(expected | missing) == 30
    starts = sorted(r.start_s for r in requests)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    pages = [r for r in requests if r.path != "/robots.txt"]
    assert len(pages) == len({r.path for r in pages}) == 30  # each page fetched once
    assert len(requests) - len(pages) <= 4  # robots.txt: at most once per worker process
    assert log.pace_violations(host, 0.2, JITTER_S) == [], f"min gap {min(gaps):.3f}s"
    assert log.max_concurrency(host) == 1


def test_four_hosts_are_crawled_in_parallel(redis_url: str, job: str, tmp_path: Path) -> None:
    root = generate_site(tmp_path / "site", n_pages=12)
    log = RequestLog()
    servers = [
        ServerThread(make_static_app(root, log=log), host=f"127.0.0.{i}") for i in (1, 2, 3, 4)
    ]
    for s in servers:
        s.start()
    ports = {s: s.port for s in servers}
    try:
        store = tmp_path / "store.db"
        seeds = [s.base_url + "/index.html" for s in servers]
        run_crawlq(
            "seed", *seeds, "--frontier", redis_url, "--job", job, "--store", str(store),
            "--delay", "0.3", "--host-concurrency", "1",
        )  # fmt: skip
        procs = [worker_proc(redis_url, job, "--exit-when-done", store=store) for _ in range(4)]
        assert wait_all(procs, 90) == [0, 0, 0, 0]
    finally:
        for s in servers:
            s.stop()
    assert sum(stored_urls(store).values()) == 4 * 12
    for s in servers:
        logged = log.requests(host=f"{s.host}:{ports[s]}")
        assert len([r for r in logged if r.path != "/robots.txt"]) == 12
        assert log.pace_violations(f"{s.host}:{ports[s]}", 0.3, JITTER_S) == []
    # In parallel, not one host after another: every host's crawl overlaps every other's.
    spans = [
        (min(r.start_s for r in log.requests(host=h)), max(r.start_s for r in log.requests(host=h)))
        for h in (f"{s.host}:{ports[s]}" for s in servers)
    ]
    assert max(start for start, _ in spans) < min(end for _, end in spans)


@web.middleware
async def slow_robots_txt(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Answer /robots.txt after 2 s: every worker process asks for it before it is stored."""
    if request.path == "/robots.txt":
        await asyncio.sleep(2.0)
    return await handler(request)


@pytest.mark.parametrize("host_concurrency", ["1", "6"])
def test_robots_txt_is_fetched_once_per_job_by_three_worker_processes(
    redis_url: str, job: str, tmp_path: Path, host_concurrency: str
) -> None:
    root = generate_site(tmp_path / "site", n_pages=60)
    # With a BOM, and disallowing sub/: a lost first group would show as /sub/ requests.
    (root / "robots.txt").write_bytes(b"\xef\xbb\xbfUser-agent: *\nDisallow: /sub/\n")
    pages = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html"))
    log = RequestLog()
    app = make_static_app(root, log=log)
    app.middlewares.append(slow_robots_txt)
    with ServerThread(app) as server:
        store = tmp_path / "store.db"
        # Every page is a seed: all three workers lease many URLs of the host at once.
        seeds = [f"{server.base_url}/{page}" for page in pages]
        run_crawlq(
            "seed", *seeds, "--frontier", redis_url, "--job", job, "--store", str(store),
            "--delay", "0", "--host-concurrency", host_concurrency, "--max-depth", "0",
        )  # fmt: skip
        # Two requests at once per worker: with 6 per host, each worker holds some at once.
        procs = [
            worker_proc(redis_url, job, "--exit-when-done", "--concurrency", "2", store=store)
            for _ in range(3)
        ]
        assert wait_all(procs, 90) == [0, 0, 0]
        requests = log.requests(host=f"127.0.0.1:{server.port}")
    allowed = [p for p in pages if not p.startswith("sub/")]
    assert [r.path for r in requests].count("/robots.txt") == 1
    fetched = Counter(r.path for r in requests if r.path != "/robots.txt")
    assert fetched == Counter(f"/{p}" for p in allowed)  # each allowed page once, no /sub/
    assert sum(stored_urls(store).values()) == len(allowed)
    out = run_crawlq("export", "--store", str(store), "--what", "filtered").stdout
    filtered = [json.loads(line) for line in out.splitlines() if line]
    assert {f["reason"] for f in filtered} == {"robots_txt"}
    assert len(filtered) == len(pages) - len(allowed)


@pytest.mark.timeout(300)
def test_sigkill_workers_repeatedly_each_page_once(
    redis_url: str, job: str, tmp_path: Path, site_root: Path
) -> None:
    rng = random.Random(1234)
    with ServerThread(make_static_app(site_root)) as server:
        expected, missing = reachable(site_root, server.base_url + "/")
        total = len(expected | missing)
        store = tmp_path / "store.db"
        env = {"CRAWLQ_VISIBILITY_TIMEOUT_S": "3"}  # job-level: the seed stores it
        config = tmp_path / "job.toml"
        config.write_text("visibility_timeout_s = 3.0\n")
        run_crawlq(
            "seed", server.base_url + "/index.html", "--frontier", redis_url, "--job", job,
            "--store", str(store), "--delay", "0", "--host-concurrency", "8",
            "--config", str(config),
        )  # fmt: skip
        slow = ["--concurrency", "4"]
        procs = [worker_proc(redis_url, job, *slow, env=env, store=store) for _ in range(3)]
        kills = 0
        deadline = time.monotonic() + 120
        for fraction in (0.15, 0.35, 0.55):
            while stored_count(store) < fraction * total:
                assert time.monotonic() < deadline, "no progress"
                assert all(p.poll() is None for p in procs), "a worker exited"
                time.sleep(0.02)
            for victim in rng.sample(range(len(procs)), k=rng.choice([1, 2])):
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait()
                kills += 1
                procs[victim] = worker_proc(redis_url, job, *slow, env=env, store=store)
        assert kills >= 3
        finisher = worker_proc(redis_url, job, "--exit-when-done", env=env, store=store)
        assert wait_all([finisher], 120) == [0]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        assert wait_all(procs, 60) == [0, 0, 0]
    urls = stored_urls(store)
    assert set(urls) == expected | missing
    assert [u for u, n in urls.items() if n > 1] == []
    final = status(redis_url, job)
    assert (final["queued"], final["in_flight"], final["delayed"], final["dead"]) == (0, 0, 0, 0)
    assert final["done"] == final["seen"] == total


def test_raw_lpush_to_the_inbox_gets_crawled(redis_url: str, job: str, tmp_path: Path) -> None:
    root = generate_site(tmp_path / "site", n_pages=5)
    with ServerThread(make_static_app(root)) as server:
        store = tmp_path / "store.db"
        created = run_crawlq(
            "seed", "--frontier", redis_url, "--job", job, "--store", str(store),
            "--allow-domain", "127.0.0.1", "--delay", "0", "--max-depth", "0",
            "--allow-private",  # inbox URLs are untrusted: their hosts are never seed hosts
        )  # fmt: skip
        assert "queued 0 new of 0" in created.stdout
        proc = worker_proc(redis_url, job, store=store)
        try:
            time.sleep(1.0)  # the worker is idle, blocked on the inbox
            inbox = Keyspace(job).inbox
            urls = [f"{server.base_url}/page-{i}.html" for i in (1, 2, 4)]
            subprocess.run(["redis-cli", "-u", redis_url, "LPUSH", inbox, *urls], check=True)
            deadline = time.monotonic() + 15
            while stored_count(store) < 3:
                assert time.monotonic() < deadline, "inbox URLs were not crawled"
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    assert set(stored_urls(store)) == set(urls)


def test_inbox_entries_naming_a_callback_the_spider_lacks_are_rejected_unfetched(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=5)
    log = RequestLog()
    with ServerThread(make_static_app(root, log=log)) as server:
        store, base = tmp_path / "store.db", server.base_url
        run_crawlq(
            "seed", "--frontier", redis_url, "--job", job, "--store", str(store),
            "--allow-domain", "127.0.0.1", "--delay", "0", "--max-depth", "0",
            "--allow-private", "--ignore-robots",
        )  # fmt: skip
        entries = [
            json.dumps({"url": f"{base}/page-1.html", "callback": "nosuch"}),
            json.dumps({"url": f"{base}/page-2.html", "callback": "_private"}),
            json.dumps({"url": f"{base}/page-3.html", "callback": "parse"}),
        ]
        client = redis.Redis.from_url(redis_url)
        try:
            client.lpush(Keyspace(job).inbox, *entries)
            run_crawlq(
                "worker", "--frontier", redis_url, "--job", job, "--store", str(store),
                "--exit-when-done",
            )  # fmt: skip
            rejected = [json.loads(x) for x in client.lrange(Keyspace(job).rejected, 0, -1)]
        finally:
            client.close()
    assert set(stored_urls(store)) == {f"{base}/page-3.html"}
    assert sorted(r.path for r in log.requests()) == ["/page-3.html"]  # nothing else asked
    reasons = sorted(r["reason"] for r in rejected)
    assert reasons == [
        "unknown_callback: '_private' is not a callback of the worker's spider Spider",
        "unknown_callback: 'nosuch' is not a callback of the worker's spider Spider",
    ]


def test_status_json_figures(redis_url: str, job: str, tmp_path: Path) -> None:
    run_crawlq(
        "seed", "http://127.0.0.1:9/a", "http://127.0.0.1:9/b", "http://127.0.0.2:9/c",
        "--frontier", redis_url, "--job", job, "--store", str(tmp_path / "s.db"),
    )  # fmt: skip
    report = status(redis_url, job)
    assert report["job"] == job
    assert (report["queued"], report["in_flight"], report["delayed"]) == (3, 0, 0)
    assert (report["dead"], report["seen"], report["done"]) == (0, 3, 0)
    assert report["stored"] == 0  # the job's store, created by the seed
    assert {h["host"]: h["queued"] for h in report["hosts"]} == {
        "127.0.0.1:9": 2,
        "127.0.0.2:9": 1,
    }


def test_joining_worker_adopts_the_job_settings_and_conflicts_are_errors(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    store = str(tmp_path / "s.db")
    run_crawlq(
        "seed", "http://127.0.0.1:9/a", "--frontier", redis_url, "--job", job,
        "--store", store, "--delay", "0.5",
    )  # fmt: skip
    again = run_crawlq(
        "seed", "http://127.0.0.1:9/b", "--frontier", redis_url, "--job", job, "--delay", "2",
        check=False,
    )  # fmt: skip
    assert again.returncode == 2
    assert "delay_s=0.5" in again.stderr and "given 2.0" in again.stderr
    ok = run_crawlq(
        "seed", "http://127.0.0.1:9/b", "--frontier", redis_url, "--job", job, "--store", store
    )
    assert "queued 1 new of 1" in ok.stdout
    # The job's SQLite path is this machine's file only if this process says so.
    guess = run_crawlq(
        "seed", "http://127.0.0.1:9/c", "--frontier", redis_url, "--job", job, check=False
    )
    assert guess.returncode == 2 and store in guess.stderr and "--trust-job-code" in guess.stderr
    trusted = run_crawlq(
        "seed", "http://127.0.0.1:9/c", "--frontier", redis_url, "--job", job, "--trust-job-code"
    )
    assert "queued 1 new of 1" in trusted.stdout


def test_spider_written_into_the_job_settings_is_not_run(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n"
        "from crawlq.spider import Spider\n\nclass Evil(Spider):\n    name = 'evil'\n"
    )
    store = str(tmp_path / "s.db")
    seed_one(redis_url, job, Path(store))
    client = redis.Redis.from_url(redis_url)
    key = Keyspace(job).job_info
    settings = json.loads(cast(bytes, client.hget(key, "settings")))
    settings["spider"] = f"{evil}:Evil"
    client.hset(key, "settings", json.dumps(settings))  # whoever can write the job's keys
    client.close()
    proc = run_crawlq(
        "worker", "--frontier", redis_url, "--job", job, "--store", store, "--exit-when-done",
        "-q", check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert f"{evil}:Evil" in proc.stderr
    assert "--spider" in proc.stderr and "--trust-job-code" in proc.stderr
    assert not marker.exists()
    # The same spider given by the worker's own command line is that operator's choice.
    other = tmp_path / "other.py"
    other.write_text("from crawlq.spider import Spider\n\nclass S(Spider):\n    name = 's'\n")
    mismatch = run_crawlq(
        "worker", "--frontier", redis_url, "--job", job, "--store", store, "--exit-when-done",
        "--spider", f"{other}:S", "-q", check=False,
    )  # fmt: skip
    assert mismatch.returncode == 2
    assert f"{evil}:Evil" in mismatch.stderr and f"{other}:S" in mismatch.stderr
    assert not marker.exists()


@pytest.mark.timeout(300)
def test_worker_survives_a_redis_restart(tmp_path: Path, site_root: Path) -> None:
    server = RedisServer(appendonly=True)
    server.start()
    try:
        root = generate_site(tmp_path / "site", n_pages=150)
        with ServerThread(make_static_app(root)) as http:
            expected, missing = reachable(root, http.base_url + "/")
            store = tmp_path / "store.db"
            run_crawlq(
                "seed", http.base_url + "/index.html", "--frontier", server.url, "--job", "r",
                "--store", str(store), "--delay", "0.01", "--host-concurrency", "2",
            )  # fmt: skip
            proc = worker_proc(
                server.url, "r", "--exit-when-done", "--concurrency", "2", store=store
            )
            deadline = time.monotonic() + 60
            while stored_count(store) < 30:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            server.stop()
            time.sleep(3)
            assert proc.poll() is None, "the worker must wait for Redis, not exit"
            server.start()
            assert wait_all([proc], 120) == [0]
        urls = stored_urls(store)
        assert set(urls) == expected | missing
        assert max(urls.values()) == 1
    finally:
        server.cleanup()


def test_crawl_with_processes_reports_a_crawl_that_rode_out_a_redis_restart(
    tmp_path: Path, site_root: Path
) -> None:
    # The children ride out the outage; the parent, whose own connection the restart closed,
    # must read the final counts again instead of failing a finished crawl ("cannot crawl").
    server = RedisServer(appendonly=True)
    server.start()
    try:
        root = generate_site(tmp_path / "site", n_pages=150)
        with ServerThread(make_static_app(root)) as http:
            store = tmp_path / "store.db"
            proc = subprocess.Popen(
                [
                    sys.executable, "-m", "crawlq", "crawl", http.base_url + "/index.html",
                    "--frontier", server.url, "--job", "r", "--store", str(store),
                    "--delay", "0.01", "--host-concurrency", "2", "--processes", "2",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 60
                while stored_count(store) < 30:
                    assert time.monotonic() < deadline and proc.poll() is None
                    time.sleep(0.02)
                server.stop()
                time.sleep(3)
                server.start()
                out, err = proc.communicate(timeout=120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert proc.returncode == 0, err
        assert "crawl finished" in out
        assert max(stored_urls(store).values()) == 1
        assert len(stored_urls(store)) == 150
    finally:
        server.cleanup()


def test_bloom_dedup_job(redis_url: str, job: str, tmp_path: Path) -> None:
    root = generate_site(tmp_path / "site", n_pages=60)
    with ServerThread(make_static_app(root)) as server:
        store = tmp_path / "store.db"
        proc = run_crawlq(
            "crawl", server.base_url + "/index.html", "--frontier", redis_url, "--job", job,
            "--store", str(store), "--delay", "0", "--host-concurrency", "8", "--bloom", "100000",
            "--processes", "1", "-q",
        )  # fmt: skip
        assert "crawl finished" in proc.stdout
        expected, missing = reachable(root, server.base_url + "/")
    urls = stored_urls(store)
    assert max(urls.values()) == 1
    # A Bloom filter may take a new URL for seen (p = 0.001 each): allow that, nothing more.
    assert set(urls) <= expected | missing
    assert len(urls) >= len(expected | missing) - 1
    client = redis.Redis.from_url(redis_url)
    assert client.hget(Keyspace(job).job_info, "dedup") == b"bloom 100000 0.001"
    assert not client.exists(Keyspace(job).seen)
    client.close()


def test_worker_and_status_of_an_unseeded_job_change_nothing(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    worker = run_crawlq("worker", "--frontier", redis_url, "--job", job, "-q", check=False)
    assert worker.returncode == 2 and "has not been seeded" in worker.stderr
    status_run = run_crawlq("status", "--frontier", redis_url, "--job", job, check=False)
    assert status_run.returncode == 1 and "does not exist" in status_run.stderr
    client = redis.Redis.from_url(redis_url)
    assert list(client.scan_iter(match=Keyspace(job).pattern())) == []
    client.close()
    seeded = run_crawlq(
        "seed", "http://127.0.0.1:9/a", "--frontier", redis_url, "--job", job, "--delay", "0",
        "--bloom", "1000", "--store", str(tmp_path / "s.db"),
    )  # fmt: skip
    assert "queued 1 new of 1" in seeded.stdout
    assert status(redis_url, job)["queued"] == 1  # a Bloom job can be watched without --bloom


def test_bad_frontier_urls_and_job_names_are_usage_errors(redis_url: str) -> None:
    for frontier, job_name in (
        ("127.0.0.1:6379", "qa"),
        ("redis://127.0.0.1:6379/x", "qa"),
        (redis_url, "bad}{name"),
    ):
        proc = run_crawlq(
            "seed", "http://127.0.0.1:9/a", "--frontier", frontier, "--job", job_name, check=False
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr


def test_max_pages_holds_across_worker_processes(redis_url: str, job: str, tmp_path: Path) -> None:
    root = generate_site(tmp_path / "site", n_pages=300)
    store = tmp_path / "store.db"
    with ServerThread(make_static_app(root)) as server:
        proc = run_crawlq(
            "crawl", server.base_url + "/index.html", "--max-pages", "50", "--processes", "2",
            "--frontier", redis_url, "--job", job, "--store", str(store), "--delay", "0",
            "--host-concurrency", "4", "--concurrency", "2", "-q",
        )  # fmt: skip
    assert "crawl stopped at --max-pages" in proc.stdout
    stored = sum(stored_urls(store).values())
    # each child takes half the budget; in-flight pages of a stopped child are still stored
    assert 50 <= stored <= 50 + 2 * 2, stored
    # the children counted those, and handed their counts to the parent's summary
    assert re.search(r"^links not followed: \d+ this run \(", proc.stdout, re.M), proc.stdout


def test_a_store_that_cannot_open_is_not_pinned_to_the_new_job(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=5)
    with ServerThread(make_static_app(root)) as server:
        seed = server.base_url + "/index.html"
        common = ("--frontier", redis_url, "--job", job, "--processes", "1", "--delay", "0")
        bad = run_crawlq(
            "crawl", seed, *common, "--store", "postgresql://x@127.0.0.1:9/db", check=False
        )
        assert bad.returncode == 1 and "cannot connect to PostgreSQL store" in bad.stderr
        good = run_crawlq("crawl", seed, *common, "--store", str(tmp_path / "s.db"), "-q")
    assert "crawl finished" in good.stdout
    assert sum(stored_urls(tmp_path / "s.db").values()) == 5


def test_status_table_goes_to_stdout_and_watch_repeats_it_off_a_terminal(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    seed_one(redis_url, job, tmp_path / "s.db")
    table = run_crawlq("status", "--frontier", redis_url, "--job", job)
    assert f"job {job}" in table.stdout and "queued" in table.stdout
    watch = subprocess.Popen(
        [sys.executable, "-m", "crawlq", "status", "--frontier", redis_url, "--job", job,
         "--watch", "--interval", "0.3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # Read until the second table: no wall-clock guess at how long start-up takes under load
    # (the timer only ends a watch that never prints, so that the assertion can fail).
    killer = threading.Timer(120.0, watch.kill)
    killer.start()
    tables = 0
    try:
        assert watch.stdout is not None
        for line in watch.stdout:
            tables += f"job {job}".encode() in line
            if tables >= 2:
                break
    finally:
        killer.cancel()
        watch.terminate()
        watch.communicate(timeout=30)
    assert tables >= 2  # a plain table per interval, not nothing


def test_worker_started_while_redis_is_down_waits_for_it(tmp_path: Path) -> None:
    server = RedisServer(appendonly=True)
    server.start()
    proc: subprocess.Popen[str] | None = None
    try:
        root = generate_site(tmp_path / "site", n_pages=5)
        with ServerThread(make_static_app(root)) as http:
            store = tmp_path / "store.db"
            run_crawlq(
                "seed", http.base_url + "/index.html", "--frontier", server.url, "--job", "w",
                "--store", str(store), "--delay", "0",
            )  # fmt: skip
            server.stop()
            proc = subprocess.Popen(
                [sys.executable, "-m", "crawlq", "worker", "--frontier", server.url, "--job", "w",
                 "--store", str(store), "--exit-when-done"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            assert proc.stderr is not None
            lines = [proc.stderr.readline() for _ in range(2)]  # two attempts, one line each
            assert all("unavailable at start" in line for line in lines), lines
            assert f"127.0.0.1:{server.port}" in lines[0] and "attempt 1" in lines[0]
            assert proc.poll() is None, "the worker must wait for Redis, not exit"
            server.start()
            assert proc.wait(timeout=120) == 0, proc.stderr.read()
        assert len(stored_urls(store)) == 5
    finally:
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()
        server.cleanup()


def test_worker_with_refused_credentials_exits_at_once(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    seed_one(redis_url, job, tmp_path / "s.db")
    wrong = redis_url.replace("redis://", "redis://nosuchuser:not-the-password@", 1)
    proc = run_crawlq("worker", "--frontier", wrong, "--job", job, "-q", check=False, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "not-the-password" not in proc.stderr and "refused" in proc.stderr
