"""A worker whose lease another worker took over waits quietly for its own fetch."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawlq.engine.seeding import seed
from crawlq.engine.service import WorkerService
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.request import CrawlRequest
from crawlq.settings import Settings


class Slow:
    """A loopback server whose ``/slow`` answers only once the test says so."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def slow(self, _: web.Request) -> web.Response:
        self.started.set()
        await self.release.wait()
        return web.Response(text="<title>slow</title>", content_type="text/html")


@pytest.fixture
async def slow_server() -> AsyncIterator[tuple[Slow, str]]:
    slow = Slow()
    app = web.Application()
    app.router.add_get("/slow", slow.slow)
    async with TestServer(app, host="127.0.0.1") as server:
        yield slow, str(server.make_url("")).rstrip("/")
    slow.release.set()


async def test_a_lost_lease_costs_no_extra_round_trips(
    redis_url: str,
    job: str,
    tmp_path: Path,
    slow_server: tuple[Slow, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "crawlq.engine.flush")
    slow, base = slow_server
    cli = {
        "frontier": redis_url, "job": job, "store": str(tmp_path / "s.db"), "delay_s": 0,
        "visibility_timeout_s": 3.0, "concurrency": 4, "obey_robots": False,
    }  # fmt: skip
    settings = Settings.build(cli=cli, env={})
    await seed(settings, [CrawlRequest(base + "/slow")])
    service = WorkerService(settings, exit_when_done=True)
    run = asyncio.create_task(service.run())
    other = await RedisFrontier.open(redis_url, job)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await asyncio.wait_for(slow.started.wait(), 30)
        worker = service.worker
        assert worker is not None
        # Another worker takes the lease over (as if ours had expired) and settles it.
        keys = Keyspace(job)
        (member,) = await client.zrange(keys.leases, 0, -1)
        await client.zadd(keys.leases, {cast(bytes, member): 0})
        (taken,) = await other.lease(1, "other-worker", 60)
        await other.ack([taken])
        while not any("lost lease" in r.getMessage() for r in caplog.records):
            await asyncio.sleep(0.05)  # the renew loop notices the loss (every 1 s here)
        before = worker.frontier.round_trips
        await asyncio.sleep(1.0)
        spent = worker.frontier.round_trips - before
        # An idle worker blocks on Redis for up to lease_wait_s (1 s) per lease call, a few
        # round trips each; the spinning loop made thousands in that second.
        assert spent <= 20, f"{spent} round trips in 1 s while waiting on its own fetch"
        slow.release.set()
        report = await asyncio.wait_for(run, 30)
        assert report.stopped_by == "done"
        stats = await other.stats()
        assert (stats.done, stats.pending) == (1, 0)
    finally:
        slow.release.set()
        if not run.done():
            service.stop(force=True)
            await asyncio.gather(run, return_exceptions=True)
        await client.aclose()
        await other.close()
