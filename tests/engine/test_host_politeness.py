"""Host politeness in a crawl: pushback, host backoff, Crawl-delay, overrides, the breaker.

The evidence is the loopback server's own request log: when each request started and ended.
Pauses are set by the worker after it has read the response, so a request that starts after
a pushback's response ended is at least the pause later, whatever the machine's load; the
only slack is the millisecond rounding of the frontier's clock (`JITTER_S`). Delays are
enforced on lease starts, and the server sees request starts, which also carry the worker's
lease-to-send latency under load (`DELAY_JITTER_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import sqlite3
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawlq.testing import FaultState, RequestLog, make_fault_app
from crawlq.testing.request_log import LoggedRequest
from crawlq.urls import normalize

from .conftest import assert_nothing_lost, crawl

JITTER_S = 0.005
DELAY_JITTER_S = 0.05


def after(requests: list[LoggedRequest], first: LoggedRequest) -> list[LoggedRequest]:
    return [r for r in requests if r.start_s > first.start_s]


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_pauses_the_whole_host(
    db: Path, base: str, log: RequestLog, status: int
) -> None:
    busy = normalize(f"{base}/busy/k/1?status={status}&retry_after=2")
    others = [f"{base}/status/200?i={i}" for i in range(9)]
    r = await crawl(db, [busy, *others], host_concurrency=1, concurrency=8)
    assert_nothing_lost(r, [busy, *others])
    assert all(r.pages[u].status == 200 for u in [busy, *others])
    assert all(r.pages[u].attempt == 1 for u in others)  # waiting spent no retries
    requests = log.requests()
    pushback = next(req for req in requests if req.path == "/busy/k/1")
    assert pushback.end_s is not None
    later = after(requests, pushback)
    assert later, "nothing was requested after the pushback"
    assert min(req.start_s for req in later) >= pushback.end_s + 2.0 - JITTER_S
    assert log.count("/busy/k/1") == 2  # the 429/503, then its retry


async def test_503_without_retry_after_backs_the_host_off_exponentially(
    db: Path, base: str, log: RequestLog
) -> None:
    busy = f"{base}/busy/x/2"
    others = [f"{base}/status/200?i={i}" for i in range(4)]
    r = await crawl(db, [busy, *others], host_concurrency=1, host_backoff_s=0.3)
    assert_nothing_lost(r, [busy, *others])
    assert (r.pages[busy].status, r.pages[busy].attempt) == (200, 3)
    requests = log.requests()
    pushbacks = [req for req in requests if req.path == "/busy/x/2"][:2]
    for pushback, pause_s in zip(pushbacks, (0.3, 0.6), strict=True):
        assert pushback.end_s is not None
        next_start = min(req.start_s for req in after(requests, pushback))
        assert next_start >= pushback.end_s + pause_s - JITTER_S


@pytest.mark.parametrize(("crawl_delay", "cap", "gap"), [("0.4", 30.0, 0.4), ("100", 0.3, 0.3)])
async def test_crawl_delay_raises_the_host_delay_up_to_its_cap(
    db: Path, base: str, host: str, log: RequestLog, state: FaultState, crawl_delay: str,
    cap: float, gap: float,
) -> None:  # fmt: skip
    state.robots_txt = f"User-agent: *\nCrawl-delay: {crawl_delay}\n"
    seeds = [f"{base}/status/200?i={i}" for i in range(5)]
    r = await crawl(db, seeds, delay_s=0, host_concurrency=4, max_crawl_delay_s=cap)
    assert_nothing_lost(r, seeds)
    starts = [req.start_s for req in log.requests() if req.path != "/robots.txt"]
    assert len(starts) == 5
    assert min(b - a for a, b in itertools.pairwise(starts)) >= gap - DELAY_JITTER_S
    assert log.max_concurrency(host) == 1  # a delay takes one request per window


async def test_per_host_override_slows_one_host(db: Path, base: str, log: RequestLog) -> None:
    host = base.split("//", 1)[1].split(":")[0]
    seeds = [f"{base}/status/200?i={i}" for i in range(4)]
    r = await crawl(db, seeds, delay_s=0, host_concurrency=8, hosts=((host, 0.3, None),))
    assert_nothing_lost(r, seeds)
    starts = [req.start_s for req in log.requests() if req.path != "/robots.txt"]
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.3 - DELAY_JITTER_S


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_host_that_refuses_connections_is_dead_lettered_by_its_breaker(
    db: Path,
) -> None:
    base = f"http://127.0.0.1:{closed_port()}"
    seeds = [f"{base}/p{i}" for i in range(20)]
    r = await crawl(
        db, seeds, obey_robots=False, host_concurrency=1, max_retries=50, retry_delay_s=0.01,
        host_backoff_s=0.01, breaker_failures=3, breaker_parks=2, breaker_cooldown_s=0.05,
    )  # fmt: skip
    assert_nothing_lost(r, seeds)
    assert r.report.stopped_by == "done"
    assert {d.reason for d in r.dead.values()} == {"host_unreachable"}
    # 3 failures open the breaker, 2 failed probes: 5 connection attempts, then no more
    assert sum(d.attempts for d in r.dead.values()) <= len(seeds) + 5
    assert r.report.counters.dead == {"host_unreachable": 20}


async def test_redirect_hops_from_six_hosts_wait_for_their_target_host(
    db: Path, log: RequestLog
) -> None:
    target_log = RequestLog()
    async with TestServer(make_fault_app(target_log), host="127.0.0.8") as target:
        target_host = f"127.0.0.8:{target.port}"
        servers = [TestServer(make_fault_app(log), host=f"127.0.0.{i}") for i in range(2, 8)]
        for s in servers:
            await s.start_server()
        try:
            seeds = [
                normalize(
                    str(s.make_url("/redirect-to"))
                    + f"?url={target.make_url('/status/200')}%3Fi%3D{i}"
                )
                for i, s in enumerate(servers)
            ]
            domains = tuple(f"127.0.0.{i}" for i in range(2, 9))
            r = await crawl(
                db, seeds, delay_s=0.5, host_concurrency=1, allowed_domains=domains,
                allow_private=True,
            )  # fmt: skip
        finally:
            for s in servers:
                await s.close()
    assert len(r.pages) == 12 and all(p.error is None for p in r.pages.values())
    hits = [req for req in target_log.requests() if req.path == "/status/200"]
    assert len(hits) == 6
    starts = sorted(req.start_s for req in hits)
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.5 - DELAY_JITTER_S
    assert target_log.max_concurrency(target_host) == 1


async def test_autothrottle_delay_rises_with_latency_and_falls_again(
    db: Path, tmp_path: Path
) -> None:
    latencies = [0.01] * 8 + [0.4] * 8 + [0.01] * 10
    served: list[int] = []

    async def page(request: web.Request) -> web.Response:
        served.append(1)
        await asyncio.sleep(latencies[min(len(served), len(latencies)) - 1])
        return web.Response(text="<title>t</title>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{n}", page)
    seen: list[float] = []

    async def watch(host: str) -> None:
        while True:
            await asyncio.sleep(0.02)
            with contextlib.suppress(sqlite3.Error):
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.1) as conn:
                    row = conn.execute(
                        "SELECT delay_ms FROM frontier_hosts WHERE host=?", (host,)
                    ).fetchone()
                if row is not None and row[0] is not None:
                    seen.append(row[0] / 1000)

    async with TestServer(app, host="127.0.0.1") as server:
        base = str(server.make_url("")).rstrip("/")
        watcher = asyncio.create_task(watch(base.split("//", 1)[1]))
        seeds = [f"{base}/p/{i}" for i in range(len(latencies))]
        try:
            r = await crawl(
                db, seeds, obey_robots=False, delay_s=0.0, host_concurrency=1,
                autothrottle=True, max_delay_s=0.3,
            )  # fmt: skip
        finally:
            watcher.cancel()
    assert len(r.pages) == len(latencies)
    assert seen, "autothrottle never wrote a delay"
    assert 0.15 <= max(seen) <= 0.3  # rose towards the 0.4 s latency, capped at max_delay_s
    assert seen[-1] < max(seen) / 2  # and fell again once the server was fast
