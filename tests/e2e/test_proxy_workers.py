"""Proxies across worker processes of one Redis job: the bench they share, and how the
processes a command starts get their proxies (environment, never argv).

The proxies' own logs are the evidence (`crawlq.testing.proxy`): each worker sends a user
name of its own to the same proxy (a proxy's id leaves its credentials out, so both count
against one bench), so the log of the failing proxy tells which worker tried it.
"""

from __future__ import annotations

import base64
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from aiohttp import web

from crawlq.frontier.redis import Keyspace
from crawlq.rules.proxies import parse_proxy
from crawlq.testing import RequestLog, ServerThread
from crawlq.testing.proxy import HttpProxy
from tests.conftest import run_crawlq
from tests.e2e.test_cli_pipes_and_jobs import _job_dump, _worker_cmdlines

pytestmark = pytest.mark.e2e

SECRET = "w0rker-pr0xy-pw"
PAGES = 6


def _site(log: RequestLog) -> web.Application:
    """Two families of pages, ``/a/N`` and ``/b/N``: each page links to its family's others."""

    async def page(request: web.Request) -> web.Response:
        family, n = request.match_info["family"], int(request.match_info["n"])
        links = "".join(f'<a href="/{family}/{i}">{i}</a>' for i in range(PAGES) if i != n)
        return web.Response(
            text=f"<html><title>{family}{n}</title>{links}</html>", content_type="text/html"
        )

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/{family}/{n}", page)
    return app


@pytest.fixture
def site() -> Iterator[tuple[str, RequestLog]]:
    log = RequestLog()
    with ServerThread(_site(log)) as server:
        yield server.base_url, log


def _seed(redis_url: str, job: str, store: Path, url: str) -> None:
    run_crawlq(
        "seed", url, "--frontier", redis_url, "--job", job, "--store", str(store),
        "--delay", "0", "--ignore-robots", "--max-retries", "0",
    )  # fmt: skip


def _stored(store: Path) -> tuple[set[str], int]:
    with sqlite3.connect(store) as conn:
        urls = {str(r[0]) for r in conn.execute("SELECT url FROM pages")}
        dead = int(conn.execute("SELECT count(*) FROM dead_letters").fetchone()[0])
    return urls, dead


def _basic(user: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{SECRET}".encode()).decode()


def _bench(redis_url: str, job: str, proxy_id: str) -> list[int] | None:
    """The job's shared bench row of ``proxy_id``: ``[failures, benches, until_ms]``."""
    client = redis.Redis.from_url(redis_url)
    try:
        row = client.hget(Keyspace(job).proxies, proxy_id)
    finally:
        client.close()
    return None if row is None else [int(v) for v in bytes(row).split()]  # type: ignore[arg-type]


def test_two_worker_processes_agree_on_the_bench(
    redis_url: str, job: str, tmp_path: Path, site: tuple[str, RequestLog]
) -> None:
    base, log = site
    store = tmp_path / "store.db"
    with HttpProxy() as good, HttpProxy(fail=True) as bad:
        bad_id = parse_proxy(f"http://{bad.address}").id

        def worker(user: str) -> subprocess.CompletedProcess[str]:
            # the failing proxy first: with rotation by request the first worker tries it
            # (and benches it) before it can store its pages
            proxies = f"http://{user}:{SECRET}@{bad.address},http://{user}:{SECRET}@{good.address}"
            return run_crawlq(
                "worker", "--frontier", redis_url, "--job", job, "--store", str(store),
                "--exit-when-done", "--proxy-rotation", "request", "-vv",
                env={"CRAWLQ_PROXIES": proxies, "CRAWLQ_PROXY_BENCH_S": "600"},
            )  # fmt: skip

        _seed(redis_url, job, store, f"{base}/a/0")
        first = worker("first")
        # the event the second worker waits for: the bench is in the job's Redis
        row = _bench(redis_url, job, bad_id)
        assert row is not None and row[1] == 1 and row[2] > time.time() * 1000, row
        tried_by_first = len(bad.log)
        _seed(redis_url, job, store, f"{base}/b/0")  # work for the second worker
        second = worker("second")
        bad_auth, good_auth = list(bad.auth), list(good.auth)
        good_log = list(good.log)
    first_auth, second_auth = _basic("first"), _basic("second")
    assert tried_by_first >= 3 and set(bad_auth) == {first_auth}  # the second never tried it
    assert len(bad_auth) == tried_by_first
    b_pages = {f"GET {base}/b/{i}" for i in range(PAGES)}
    assert b_pages <= set(good_log)  # the second worker crawled its pages, all through good
    assert good_auth.count(second_auth) == PAGES
    urls, dead = _stored(store)
    assert len(urls) == 2 * PAGES and dead == 0  # no URL dead-lettered, with --max-retries 0
    assert log.count() == 2 * PAGES  # each page reached the origin once, through the proxy
    out = first.stdout + first.stderr + second.stdout + second.stderr
    assert "benched for" in first.stdout + first.stderr and "retry " not in out
    assert SECRET not in out and SECRET not in _job_dump(redis_url, job)


def test_crawl_processes_send_every_request_of_each_child_through_the_proxy(
    redis_url: str, job: str, tmp_path: Path, site: tuple[str, RequestLog]
) -> None:
    base, log = site
    store = tmp_path / "store.db"
    with HttpProxy(user="bob", password=SECRET) as proxy:
        proc = run_crawlq(
            "crawl", f"{base}/a/0", f"{base}/b/0", "--frontier", redis_url, "--job", job,
            "--store", str(store), "--processes", "2", "--delay", "0", "--ignore-robots",
            "--max-retries", "0", "--proxy", f"http://bob:{SECRET}@{proxy.address}",
        )  # fmt: skip
        proxied = sorted(proxy.log)
        auth = set(proxy.auth)
    urls, dead = _stored(store)
    assert len(urls) == 2 * PAGES and dead == 0
    # a child that went direct would show at the origin and not in the proxy's log
    assert proxied == sorted(f"GET {base}/{f}/{i}" for f in "ab" for i in range(PAGES))
    assert log.count() == len(proxied) and auth == {_basic("bob")}
    assert SECRET not in proc.stdout + proc.stderr and SECRET not in _job_dump(redis_url, job)


def test_worker_processes_get_their_proxies_from_the_environment_not_argv(
    redis_url: str, job: str, tmp_path: Path, site: tuple[str, RequestLog]
) -> None:
    base, log = site
    store = tmp_path / "store.db"
    _seed(redis_url, job, store, f"{base}/a/0")
    with HttpProxy(user="bob", password=SECRET) as proxy:
        parent = subprocess.Popen(
            [sys.executable, "-m", "crawlq", "worker", "--frontier", redis_url, "--job", job,
             "--store", str(store), "--processes", "2", "-q",
             "--proxy", f"http://bob:{SECRET}@{proxy.address}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ),
        )  # fmt: skip
        try:
            cmdlines = _worker_cmdlines(parent, 2)  # the children, while they run
            deadline = time.monotonic() + 90  # a bound on a hang, not an expected duration
            while len(_stored_if_any(store)) < PAGES and parent.poll() is None:
                assert time.monotonic() < deadline, "the workers did not store the pages"
                time.sleep(0.05)
        finally:
            parent.send_signal(signal.SIGTERM)  # idle workers wait for work until stopped
            out, err = parent.communicate(timeout=60)
        proxied = sorted(proxy.log)
    for line in cmdlines:
        assert SECRET not in line and "--proxy" not in line, line
    assert proxied == sorted(f"GET {base}/a/{i}" for i in range(PAGES))  # both children's
    assert log.count() == PAGES
    assert SECRET.encode() not in out + err


def _stored_if_any(store: Path) -> set[str]:
    try:
        return _stored(store)[0]
    except sqlite3.Error:  # not created yet, or locked by a writer
        return set()
