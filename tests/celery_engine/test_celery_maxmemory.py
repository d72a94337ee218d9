"""The Celery engine's state on a Redis at its ``maxmemory`` (``noeviction``): it drains.

A private ``redis-server`` (stopped by PID) gets ``maxmemory 1`` once the job's URLs are
admitted, so every command that may grow memory is refused (``OOM``). A task still takes its
pending URLs, records its runner, takes host slots, reschedules, settles and beats; orphans
are taken back; only `CeleryState.admit` (new URLs) raises `FrontierFull`, writing nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from crawlq.celery.state import TAKE_DUPLICATE, TAKE_RUN, TAKE_UNSEEN, CeleryState
from crawlq.celery.state.core import SCRIPTS
from crawlq.clock import ManualClock
from crawlq.errors import FrontierFull
from crawlq.frontier.redis import Keyspace
from crawlq.frontier.redis.scripts import Script
from crawlq.politeness import HostPolicy
from crawlq.request import CrawlRequest
from tests.services import RedisServer


def reqs(*paths: str) -> list[CrawlRequest]:
    return [CrawlRequest(f"http://a.test/{p}") for p in paths]


@pytest.fixture
async def full() -> AsyncIterator[tuple[CeleryState, aioredis.Redis]]:
    """A Celery job with three pending URLs on a private Redis that then refuses growing writes."""
    server = RedisServer(appendonly=False, args=("--maxmemory-policy", "noeviction"))
    server.start()
    client = aioredis.Redis.from_url(server.url)
    state = await CeleryState.open(server.url, "full")
    try:
        assert (
            await state.admit([(r, "seed") for r in reqs("a", "b", "c")], run=False) == [True] * 3
        )
        await client.config_set("maxmemory", "1")  # every write that may grow memory: OOM
        yield state, client
    finally:
        await state.close()
        await client.aclose()
        server.cleanup()


def test_the_draining_scripts_run_at_maxmemory_and_admit_does_not() -> None:
    allowed = {name for name, script in SCRIPTS.items() if script.allows_oom}
    draining = {"take", "settle", "acquire", "orphans", "start_task", "reschedule"}
    assert allowed == draining
    for name in allowed:  # Redis reads script flags from the first line only
        assert SCRIPTS[name].source.startswith("#!lua flags=allow-oom\n"), name
    assert Script("heartbeat", "crawlq.celery").allows_oom


async def test_a_full_redis_runs_the_tasks_already_sent_and_refuses_new_urls(
    full: tuple[CeleryState, aioredis.Redis],
) -> None:
    state, client = full
    k = Keyspace("full")
    a, b, c = reqs("a", "b", "c")
    with pytest.raises(FrontierFull, match="maxmemory"):
        await state.admit([(r, "page") for r in reqs("new")], run=False)
    assert (await state.counts()).seen == 3  # the refused admit wrote nothing
    unseen = reqs("unseen")[0]
    flags = await state.take([a.fingerprint, b.fingerprint, c.fingerprint, unseen.fingerprint])
    assert flags == [TAKE_RUN, TAKE_RUN, TAKE_RUN, TAKE_UNSEEN]
    with pytest.raises(FrontierFull):  # a scrape.delay URL never admitted: refused
        await state.admit([(unseen, "task")], run=True)

    await state.start_task("host-1:42:7", [a.fingerprint, b.fingerprint])
    assert await client.hget(k.running, "host-1:42:7") == a.fingerprint + b.fingerprint
    grant = await state.acquire("a.test", 2, HostPolicy(0.0, 4), 60.0, "host-1:42:7")
    assert len(grant.tokens) == 2
    await state.release("a.test", grant.tokens)
    await state.reschedule([c.fingerprint], 30.0)
    await state.add_delayed(1)
    assert (await state.counts()).delayed == 1
    beat = Script("heartbeat", "crawlq.celery")
    assert await beat.run(client, [k.job_info, k.workers], ["host-2:9", 1]) == 1

    assert await state.settle([a.fingerprint], [b.fingerprint], ["a.test"], frontier_full=4) == 2
    assert await state.settle([a.fingerprint], [], frontier_full=4) == 0  # counted once
    counts = await state.counts()
    assert (counts.done, counts.dead, counts.pending, counts.frontier_full) == (1, 1, 1, 4)
    assert await state.take([a.fingerprint], retries_started=1) == [TAKE_DUPLICATE]
    assert (await state.counts()).delayed == 0

    # the runner of c dies: its URL is taken back at maxmemory too
    await state.start_task("host-3:1:1", [c.fingerprint])
    state.clock = ManualClock(state.clock.wall_ms() + 3_600_000)
    (orphan,) = await state.orphans(60.0)
    assert orphan.url == c.url
    await state.end_task("host-1:42:7")
    assert await state.settle([c.fingerprint], []) == 1
    assert (await state.counts()).pending == 0
