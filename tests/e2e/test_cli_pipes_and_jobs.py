"""The command line at its edges: a reader that closes the pipe early, and bad job names.

Every command runs as a subprocess (``python -m crawlq``); Redis tests use a job of their own.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import redis

from crawlq.records import DeadRecord, ItemRecord, PageRecord
from crawlq.settings import JOB_NAME_RULE
from crawlq.store import ResultBatch
from crawlq.store.sqlite import SqliteStore
from tests.conftest import run_crawlq
from tests.e2e.test_distributed import seed_one

pytestmark = pytest.mark.e2e

N_ROWS = 3000
"""Rows per kind: far more than a pipe buffer (64 KiB) holds, so the writer meets the close."""

EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what ``crawlq export`` chose (see its help), as a shell shows for ``cat``."""
T0 = 1.7e9


def _fp(tag: str, n: int) -> bytes:
    return hashlib.sha1(f"{tag}{n}".encode()).digest()


def _page(i: int) -> PageRecord:
    url = f"https://e.test/{i}"
    return PageRecord(_fp("p", i), url, url, 200, "text/html", 1, f"Page {i}", T0 + i, 100, 0.1,
                      1, None, "docs")  # fmt: skip


async def _fill(path: Path) -> None:
    store = await SqliteStore.open(path)
    try:
        await store.write(
            ResultBatch(
                pages=[_page(i) for i in range(N_ROWS)],
                items=[
                    ItemRecord(_fp("p", i), 0, f"https://e.test/{i}", "docs", {"n": i}, T0 + i)
                    for i in range(N_ROWS)
                ],
                dead=[
                    DeadRecord(_fp("d", i), f"https://e.test/d{i}", "timeout", "t", 1, 1, T0 + i)
                    for i in range(N_ROWS)
                ],
            )
        )
    finally:
        await store.close()


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pipe") / "s.db"
    asyncio.run(_fill(path))
    return path


def read_then_close(cmd: list[str], lines: int, timeout_s: float = 60) -> tuple[int, str, bytes]:
    """Run ``cmd``, read ``lines`` lines of its stdout, close it: (exit status, stderr, read)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            got = b"".join(proc.stdout.readline() for _ in range(lines))
            proc.stdout.close()  # the reader goes away, as `| head -3` does
            err = proc.stderr.read().decode()
            code = proc.wait(timeout=timeout_s)
        finally:
            if proc.poll() is None:
                proc.kill()
    return code, err, got


@pytest.mark.parametrize(("what", "fmt"), [("pages", "jsonl"), ("items", "csv"), ("dead", "csv")])
def test_export_into_a_pipe_closed_early_stops_silently(
    big_store: Path, what: str, fmt: str
) -> None:
    cmd = [sys.executable, "-m", "crawlq", "export", "--store", str(big_store), "--what", what]
    code, err, got = read_then_close([*cmd, "--format", fmt], lines=3)
    assert err == ""
    assert code == EXIT_BROKEN_PIPE
    assert got.count(b"\n") == 3


def test_export_to_a_file_and_a_whole_pipe_still_succeed(big_store: Path, tmp_path: Path) -> None:
    whole = run_crawlq("export", "--store", str(big_store), "--what", "items")
    assert whole.stderr == "" and len(whole.stdout.splitlines()) == N_ROWS
    for fmt in ("jsonl", "csv", "parquet"):
        out = tmp_path / f"pages.{fmt}"
        proc = run_crawlq("export", "--store", str(big_store), "--format", fmt, "-o", str(out))
        assert proc.stderr.strip() == f"wrote {N_ROWS} pages rows to {out}"
        assert proc.stdout == ""
    assert len((tmp_path / "pages.jsonl").read_text().splitlines()) == N_ROWS
    assert len((tmp_path / "pages.csv").read_text().splitlines()) == N_ROWS + 1


def test_status_watch_into_a_pipe_closed_early_stops_silently(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    seed_one(redis_url, job, tmp_path / "s.db")
    cmd = [sys.executable, "-m", "crawlq", "status", "--frontier", redis_url, "--job", job]
    code, err, got = read_then_close([*cmd, "--watch", "--interval", "0.2"], lines=2)
    assert f"job {job}".encode() in got
    assert err == ""
    assert code == EXIT_BROKEN_PIPE


# -- job names --------------------------------------------------------------------------------

BAD_NAMES = {
    "empty": "",
    "brace": "a{b",
    "space": "a b",
    "non-ascii": "café",
    "201 chars": "j" * 201,
}


def _assert_one_usage_error(proc: subprocess.CompletedProcess[str], names: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    assert names in errors[0] and JOB_NAME_RULE in errors[0]


def _no_job_keys(redis_url: str, name: str) -> bool:
    if "{" in name or "}" in name:
        return True  # no key can be spelled with it
    client = redis.Redis.from_url(redis_url)
    try:
        return not client.exists(*(f"crawlq:{{{name}}}:{k}" for k in ("job", "seen", "stats")))
    finally:
        client.close()


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_bad_job_names_are_refused_before_redis_is_touched(
    redis_url: str, tmp_path: Path, name: str
) -> None:
    proc = seed_one(redis_url, name, tmp_path / "s.db", check=False)
    _assert_one_usage_error(proc, "--job")
    assert _no_job_keys(redis_url, name)
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("command", ["crawl", "worker", "status", "celery crawl"])
def test_every_command_refuses_a_bad_job_name(redis_url: str, tmp_path: Path, command: str) -> None:
    common = ["--frontier", redis_url, "--job", "a b"]
    args = {
        "crawl": ["crawl", "http://127.0.0.1:9/a", *common, "--store", str(tmp_path / "s.db")],
        "worker": ["worker", *common, "-q"],
        "status": ["status", *common],
        "celery crawl": [
            "crawl", "http://127.0.0.1:9/a", *common, "--engine", "celery",
            "--broker", redis_url, "--store", str(tmp_path / "s.db"),
        ],
    }[command]  # fmt: skip
    _assert_one_usage_error(run_crawlq(*args, check=False), "--job")
    assert _no_job_keys(redis_url, "a b")


def test_a_bad_job_name_from_the_environment_names_the_variable(
    redis_url: str, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "crawlq", "seed", "http://127.0.0.1:9/a", "--frontier", redis_url,
         "--store", str(tmp_path / "s.db")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "CRAWLQ_JOB": "bad}name"},
    )  # fmt: skip
    _assert_one_usage_error(proc, "CRAWLQ_JOB")
    assert "--job" not in proc.stderr.split("Error:")[1]


@pytest.fixture
def odd_good_job(redis_url: str) -> Iterator[str]:
    """A job name using every kind of character the rule allows; its keys deleted after."""
    name = f"Q.a_b:c-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"crawlq:\\{{{name}\\}}:*"):
        client.unlink(key)
    client.close()


def test_a_good_job_name_works(redis_url: str, odd_good_job: str, tmp_path: Path) -> None:
    seeded = seed_one(redis_url, odd_good_job, tmp_path / "s.db")
    assert f"queued 1 new of 1 in job {odd_good_job}" in seeded.stdout
    status = run_crawlq("status", "--frontier", redis_url, "--job", odd_good_job, "--json")
    report = json.loads(status.stdout)
    assert (report["job"], report["queued"], report["engine"]) == (odd_good_job, 1, "native")


# -- issue 12.10: a store password stays with the processes that need it ---------------------

SECRET = "s3cret"


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[str]:
    """A PostgreSQL store URL with a password (trust auth ignores it) and a schema of its own."""
    psycopg = pytest.importorskip("psycopg")
    from psycopg import sql

    schema = f"crawlq_test_{uuid.uuid4().hex[:12]}"
    scheme, _, rest = postgres_url.partition("://")
    userinfo, _, hostpart = rest.rpartition("@")
    user = userinfo.split(":")[0] or "postgres"
    sep = "&" if "?" in hostpart else "?"
    yield f"{scheme}://{user}:{SECRET}@{hostpart}{sep}options=-csearch_path%3D{schema}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _job_dump(redis_url: str, job: str) -> str:
    """Every key and value of the job in Redis, as text."""
    client = redis.Redis.from_url(redis_url)
    parts: list[str] = []
    try:
        for key in client.scan_iter(match=f"crawlq:\\{{{job}\\}}:*"):
            kind = client.type(key)
            value: object = {
                b"hash": client.hgetall,
                b"string": client.get,
                b"list": lambda k: client.lrange(k, 0, -1),
            }.get(cast(bytes, kind), lambda k: b"")(key)
            parts.append(f"{key!r} {value!r}")
    finally:
        client.close()
    return "\n".join(parts)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _worker_cmdlines(parent: subprocess.Popen[bytes], count: int) -> list[str]:
    """The command lines of ``count`` worker children of ``parent``, read while they run."""
    while parent.poll() is None:
        lines = []
        for child in _children(parent.pid):
            try:
                lines.append((Path("/proc") / str(child) / "cmdline").read_bytes())
            except OSError:
                continue
        workers = [b.replace(b"\0", b" ").decode() for b in lines if b"worker" in b]
        if len(workers) == count:
            return workers
        time.sleep(0.02)
    raise AssertionError(f"the crawl exited ({parent.returncode}) before its workers were seen")


def test_a_store_password_is_not_in_the_job_nor_on_child_command_lines(
    redis_url: str, job: str, pg_store: str
) -> None:
    from crawlq.testing import ServerThread, make_fault_app

    with ServerThread(make_fault_app()) as server:
        crawl = subprocess.Popen(
            [sys.executable, "-m", "crawlq", "crawl", f"{server.base_url}/page/1", "--frontier",
             redis_url, "--job", job, "--store", pg_store, "--processes", "2", "--delay", "0.02",
             "--max-pages", "40", "-q"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            cmdlines = _worker_cmdlines(crawl, 2)
        finally:
            _, err = crawl.communicate(timeout=120)
        assert crawl.returncode == 0, err.decode()
        for line in cmdlines:
            assert SECRET not in line and "redis://" not in line and "--store" not in line, line
        assert SECRET not in _job_dump(redis_url, job)
        settings = json.loads(
            cast(bytes, redis.Redis.from_url(redis_url).hget(f"crawlq:{{{job}}}:job", "settings"))
        )
        assert settings["store"] == pg_store.replace(f":{SECRET}@", "@")

        # a worker that gives the store with its password is not in conflict with the job
        worker = run_crawlq(
            "worker", "--frontier", redis_url, "--job", job, "--store", pg_store,
            "--exit-when-done", "--max-pages", "1", "-q",
        )  # fmt: skip
        assert SECRET not in worker.stdout + worker.stderr
        report = json.loads(
            run_crawlq(
                "status", "--frontier", redis_url, "--job", job, "--json",
                env={"CRAWLQ_STORE": pg_store},
            ).stdout
        )  # fmt: skip
        assert report["stored"] >= 40
