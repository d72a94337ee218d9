"""Hostile pages and slow callbacks do not stall a worker (issue 12 item 4).

A deeply nested page is refused before lexbor parses it; a page with too many links is cut;
a callback runs on the page thread, so the event loop keeps renewing leases and answering
signals whatever it does, and a callback past its budget is recorded, not waited for.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawlq.frontier.sqlite import SqliteFrontier
from crawlq.spider import Response, Spider
from crawlq.testing import RequestLog, ServerThread
from tests.engine.conftest import crawl

DEEP = 100_000
MANY_LINKS = 500_000


def _html(body: str, title: str = "t") -> web.Response:
    return web.Response(
        text=f"<!doctype html><title>{title}</title><body>{body}", content_type="text/html"
    )


def hostile_app(log: RequestLog) -> web.Application:
    async def index(request: web.Request) -> web.Response:
        links = "".join(
            f'<a href="/{p}">{p}</a>' for p in ("deep", "slow", "stuck", "many", "after")
        )
        return _html(links, "index")

    async def deep(request: web.Request) -> web.Response:
        return _html("<div>" * DEEP + '<a href="/never">never</a>', "deep")

    async def many(request: web.Request) -> web.Response:
        n = int(request.query.get("n", "20000"))
        return _html("".join(f"<a href=p{i}>x</a>" for i in range(n)), "many")  # ~19 B each

    async def plain(request: web.Request) -> web.Response:
        return _html("plain", request.path.strip("/"))

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/", index)
    app.router.add_get("/deep", deep)
    app.router.add_get("/many", many)
    app.router.add_get("/{name:.*}", plain)
    return app


@pytest.fixture
async def site(log: RequestLog) -> AsyncIterator[str]:
    async with TestServer(hostile_app(log), host="127.0.0.1") as server:
        yield str(server.make_url("")).rstrip("/")


PARSE_BUDGET_S = 5.0
"""The parse budget of the budget test: roomy, so that /many's 20,000 links parse within it on a
loaded machine (1 s did not, once); /stuck's callback sleeps three times as long."""
STUCK_S = 3 * PARSE_BUDGET_S


class SleepySpider(Spider):
    """Sleeps in its callback on /slow (blocking: time.sleep), forever-ish on /stuck."""

    def parse(self, response: Response) -> Any:
        path = response.url.rsplit("/", 1)[-1]
        if path == "slow":
            time.sleep(2.5)
        elif path == "stuck":
            time.sleep(STUCK_S)
        yield {"path": path}
        yield from response.follow_all()


async def test_a_deep_page_is_stored_as_too_deep_fetched_once_and_the_crawl_goes_on(
    site: str, db: Path, log: RequestLog
) -> None:
    # The deep page first, then one more (FIFO): not the index, whose /many adds 20,000 pages.
    seeds = [f"{site}/deep", f"{site}/after"]
    results = await crawl(db, seeds, visibility_timeout_s=15, obey_robots=False)
    deep = results.pages[f"{site}/deep"]
    assert deep.error == "html_too_deep: more than 512 nested elements"
    assert deep.title is None
    assert log.count("/deep") == 1
    assert log.count("/never") == 0  # no links taken from it
    assert results.pages[f"{site}/after"].error is None
    assert results.report.stopped_by == "done"


async def test_a_slow_callback_keeps_its_lease_renewed(
    site: str, db: Path, log: RequestLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The callback blocks 2.5 s; the visibility timeout is 0.9 s (renewals every 0.3 s). The
    # callback runs on the page thread, so the event loop (this test's) keeps ticking and the
    # worker keeps renewing the lease meanwhile.
    renewals: list[tuple[float, int]] = []
    renew = SqliteFrontier.renew

    async def counted(self: SqliteFrontier, leases: Any, *args: Any, **kwargs: Any) -> Any:
        renewals.append((time.monotonic(), len(leases)))
        return await renew(self, leases, *args, **kwargs)

    monkeypatch.setattr(SqliteFrontier, "renew", counted)
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.05)

    ticker = asyncio.create_task(tick())
    try:
        results = await crawl(
            db, [f"{site}/slow"], SleepySpider, visibility_timeout_s=0.9, obey_robots=False
        )
    finally:
        ticker.cancel()
    assert log.count("/slow") == 1
    assert results.pages[f"{site}/slow"].attempt == 1
    assert [i.data for i in results.items] == [{"path": "slow"}]
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 1.0  # the loop never stalled
    holding = [t for t, n in renewals if n == 1]
    assert len(holding) >= 5  # ~8 renewals of the lease during the 2.5 s callback


async def test_a_callback_past_its_budget_is_recorded_and_the_crawl_goes_on(
    site: str, db: Path, log: RequestLog
) -> None:
    results = await crawl(
        db,
        [f"{site}/"],
        SleepySpider,
        parse_timeout_s=PARSE_BUDGET_S,
        obey_robots=False,
        max_depth=1,
    )
    stuck = results.pages[f"{site}/stuck"]
    assert stuck.error == f"parse_timeout: parsing or the callback ran past {PARSE_BUDGET_S:g}s"
    assert log.count("/stuck") == 1
    assert {i.data["path"] for i in results.items} >= {"", "after", "many"}
    assert "stuck" not in {i.data["path"] for i in results.items}  # its output is dropped
    assert results.report.stopped_by == "done"


async def test_links_over_the_cap_are_not_taken_and_the_cap_is_recorded(
    site: str, db: Path, log: RequestLog
) -> None:
    results = await crawl(
        db, [f"{site}/many?n=20000"], max_links_per_page=100, max_depth=0, obey_robots=False
    )
    page = results.pages[f"{site}/many?n=20000"]
    assert page.error == "links_capped: 100 of 20000"
    assert page.title == "many"
    assert results.report.counters.skipped["max_depth"] == 100


# -- whole processes ------------------------------------------------------------------------

SLEEPY_SPIDER = """
import time
from crawlq.spider import Spider

class Sleepy(Spider):
    def parse(self, response):
        time.sleep(60)
        yield {"url": response.url}
"""


def _wait_for(log: RequestLog, path: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while log.count(path) == 0:
        assert proc.poll() is None, "crawlq exited before fetching the page"
        assert time.monotonic() < deadline, f"{path} never fetched"
        time.sleep(0.05)


@pytest.mark.e2e  # crawlq processes, seconds each: out of the fast lane
def test_sigterm_during_a_blocking_callback_is_answered_promptly(tmp_path: Path) -> None:
    spider = tmp_path / "sleepy.py"
    spider.write_text(SLEEPY_SPIDER)
    log = RequestLog()
    with ServerThread(hostile_app(log)) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "crawlq", "crawl", f"{server.base_url}/slow",
             "--store", str(tmp_path / "s.db"), "--spider", f"{spider}:Sleepy",
             "--ignore-robots", "--delay", "0", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            _wait_for(log, "/slow", proc)
            time.sleep(0.5)  # in the callback's sleep now
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=30)
            answered_s = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    # The callback sleeps 60 s: an answer well inside that did not wait for it (the bound is
    # generous for a loaded machine, where a process exit alone can take seconds).
    assert answered_s < 30, f"SIGTERM took {answered_s:.1f}s during a 60 s callback"
    assert b"Traceback" not in stderr


_PEAK_RSS_LAUNCHER = """
import os, subprocess, sys
env = {k: v for k, v in os.environ.items() if not k.startswith('COVERAGE_')}  # untraced
proc = subprocess.Popen(sys.argv[1:], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""
"""Runs a command and prints its exit code and its own peak RSS in kB (``wait4``); the
command runs without coverage's tracer (``pytest --cov`` measures subprocesses)."""


@pytest.mark.e2e  # crawlq processes, seconds each: out of the fast lane
def test_a_page_with_500k_links_stays_within_150_mb(tmp_path: Path) -> None:
    log = RequestLog()
    store = tmp_path / "s.db"
    with ServerThread(hostile_app(log)) as server:
        url = f"{server.base_url}/many?n={MANY_LINKS}"
        # Started from a small launcher process: a child forked straight from this (large)
        # pytest process would count the parent's pages in its peak RSS until its exec.
        out = subprocess.run(
            [sys.executable, "-c", _PEAK_RSS_LAUNCHER, sys.executable, "-m", "crawlq",
             "crawl", url, "--store", str(store), "--ignore-robots", "--delay", "0",
             "--max-depth", "0", "-q"],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout.split()  # fmt: skip
    returncode, peak_kb = int(out[0]), int(out[1])
    assert returncode == 0
    peak_mb = peak_kb / 1024  # kilobytes on Linux
    assert peak_mb < 150, f"peak RSS {peak_mb:.0f} MB"
    print(f"peak RSS {peak_mb:.0f} MB")
    with sqlite3.connect(store) as db:
        (error,) = db.execute("SELECT error FROM pages").fetchone()
    assert error == f"links_capped: 10000 of {MANY_LINKS}"


TWO_WORKER_SPIDER = """
import time
from crawlq.spider import Spider

class SlowOnOnePage(Spider):
    def parse(self, response):
        if response.url.endswith("/slow"):
            time.sleep(60)
        yield from response.follow_all()
"""


@pytest.mark.e2e  # crawlq processes, seconds each: out of the fast lane
def test_two_workers_fetch_a_deep_page_once_and_stop_promptly_during_a_slow_callback(
    tmp_path: Path, redis_url: str, job: str
) -> None:
    # Two worker processes on a shared frontier, a 15 s visibility timeout: the deep page is
    # refused at once and fetched once; the crawl goes on while one worker sits in a 60 s
    # callback; SIGTERM to the parent stops both workers within seconds.
    spider = tmp_path / "slow_on_one_page.py"
    spider.write_text(TWO_WORKER_SPIDER)
    store = tmp_path / "s.db"
    log = RequestLog()
    with ServerThread(hostile_app(log)) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "crawlq", "crawl", f"{server.base_url}/",
             "--frontier", redis_url, "--job", job, "--processes", "2", "--store", str(store),
             "--spider", f"{spider}:SlowOnOnePage", "--ignore-robots", "--delay", "0",
             "--host-concurrency", "4", "--max-depth", "1", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "CRAWLQ_VISIBILITY_TIMEOUT_S": "15"},
        )  # fmt: skip
        try:
            for path in ("/slow", "/deep", "/after", "/many"):
                _wait_for(log, path, proc)
            deadline = time.monotonic() + 30
            while _stored(store, f"{server.base_url}/after") is None:  # written while /slow sleeps
                assert time.monotonic() < deadline, "the crawl stalled behind the slow callback"
                time.sleep(0.1)
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=60)
            answered_s = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        base = server.base_url
    assert answered_s < 30, f"SIGTERM took {answered_s:.1f}s during a 60 s callback"
    assert b"Traceback" not in stderr
    assert log.count("/deep") == 1
    assert _stored(store, f"{base}/deep") == "html_too_deep: more than 512 nested elements"
    assert log.count("/slow") == 1


def _stored(store: Path, url: str) -> str | None:
    """The page's error ("" when none), or None when the page is not stored (yet)."""
    if not store.exists():
        return None
    with sqlite3.connect(store) as db:
        try:
            row = db.execute("SELECT error FROM pages WHERE url = ?", (url,)).fetchone()
        except sqlite3.OperationalError:  # not created yet
            return None
    return None if row is None else (row[0] or "")
