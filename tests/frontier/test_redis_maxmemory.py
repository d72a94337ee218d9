"""The Redis frontier on a Redis at its ``maxmemory`` (``noeviction``): it drains itself.

A private ``redis-server`` (stopped by PID) gets ``maxmemory 1`` once the job is seeded, so
every command that may grow memory is refused (``OOM``). The steps that drain a job (lease,
renew, ack, retry, dead, release, requeue, the idle wait, robots.txt and host bookkeeping)
go on; a push of new URLs raises `FrontierFull` and writes nothing; inbox entries wait in
the inbox.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from crawlq.engine.flush import Flusher, HeldLeases, KnownFingerprints
from crawlq.engine.outcome import Kind, Outcome
from crawlq.errors import FrontierFull
from crawlq.frontier import HostPolicy
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.frontier.redis.scripts import SCRIPTS
from crawlq.frontier.robots import RobotsRecord
from crawlq.records import PageRecord
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import Strike, StrikePlan
from crawlq.store import open_store
from tests.services import RedisServer

POLICY = HostPolicy(delay_s=0.0, concurrency=100)


def reqs(*paths: str) -> list[CrawlRequest]:
    return [CrawlRequest(f"http://a.test/{p}") for p in paths]


@pytest.fixture
async def full() -> AsyncIterator[tuple[RedisFrontier, aioredis.Redis]]:
    """A job of six queued requests on a private Redis that then refuses growing writes."""
    server = RedisServer(appendonly=False, args=("--maxmemory-policy", "noeviction"))
    server.start()
    client = aioredis.Redis.from_url(server.url)
    f = await RedisFrontier.open(server.url, "full", default_policy=POLICY, create=True)
    try:
        assert await f.push(reqs(*"abcdef")) == 6
        await client.config_set("maxmemory", "1")  # every write that may grow memory: OOM
        yield f, client
    finally:
        await f.close()
        await client.aclose()
        server.cleanup()


def test_the_draining_scripts_run_at_maxmemory_and_the_growing_ones_do_not() -> None:
    allowed = {name for name, script in SCRIPTS.items() if script.allows_oom}
    assert {"lease", "settle", "renew", "requeue", "idle", "robots_put"} <= allowed
    assert not {"push", "drain_inbox", "revive", "job_open", "job_settings"} & allowed
    for name in allowed:  # Redis reads script flags from the first line only
        assert SCRIPTS[name].source.startswith("#!lua flags=allow-oom\n"), name


async def test_a_full_redis_leases_and_settles_but_refuses_new_urls(
    full: tuple[RedisFrontier, aioredis.Redis],
) -> None:
    f, _ = full
    with pytest.raises(FrontierFull, match="maxmemory"):
        await f.push(reqs("new"))
    assert (await f.stats()).seen == 6  # the refused push wrote nothing
    leases = await f.lease(6, "w", 60)
    assert len(leases) == 6
    assert len(await f.renew(leases, 60, "w")) == 6
    acked, retried, dead, released = leases[:3], leases[3], leases[4], leases[5]
    assert await f.ack(acked) == 3
    await f.retry(retried, 0.0, "http_503")
    await f.dead(dead, "http_404")
    assert await f.release([released]) == 1
    await f.host_strike("a.test", Strike.PUSHBACK, StrikePlan(pauses_s=(0.0,)))
    await f.robots_put("http://a.test", RobotsRecord("parsed", 1, 2, body="User-agent: *\n"))
    stats = await f.stats()
    assert (stats.done, stats.dead, stats.in_flight) == (3, 1, 0)
    again = await f.lease(6, "w", 60, wait_s=5.0)  # the release and the due retry come back
    assert sorted(x.request.url for x in again) == sorted(
        x.request.url for x in (retried, released)
    )
    await f.ack(again)
    assert (await f.stats()).pending == 0


async def test_inbox_entries_wait_in_the_inbox_of_a_full_redis(
    full: tuple[RedisFrontier, aioredis.Redis],
) -> None:
    f, client = full
    await client.config_set("maxmemory", "0")
    await client.lpush(Keyspace("full").inbox, "http://a.test/from-inbox")
    await client.config_set("maxmemory", "1")
    leases = await f.lease(10, "w", 60)  # the drain is refused: the lease goes on
    assert len(leases) == 6 and f.full
    await f.ack(leases)
    assert await f.lease(1, "w", 60, wait_s=1.5) == []  # the idle wait polls, no BLMOVE
    keys = Keyspace("full")
    waiting = await client.lrange(keys.inbox, 0, -1) + await client.lrange(keys.claim("w"), 0, -1)
    assert b"http://a.test/from-inbox" in waiting  # in the inbox or this worker's claim
    assert (await f.stats()).seen == 6  # not queued
    await client.config_set("maxmemory", "0")
    (lease,) = await f.lease(1, "w", 60, wait_s=5.0)
    assert lease.request.url == "http://a.test/from-inbox" and not f.full


async def test_a_worker_counts_the_links_and_revisits_a_full_redis_refused(
    full: tuple[RedisFrontier, aioredis.Redis], tmp_path: Path
) -> None:
    # A cookie wall's redirect (its revisit) and a plain link on one page, flushed while Redis
    # refuses pushes: the page is stored and acked, and both links count as not followed.
    f, _ = full
    (lease,) = await f.lease(1, "w", 60)
    url = lease.request.url
    revisit = CrawlRequest(url, cookies={"session": "1"}, revisit=True)
    link = CrawlRequest("http://a.test/new")
    record = PageRecord(lease.request.record_fingerprint, url, url, 302, "text/html", 0, None,
                        1.7e9, 0, 0.1, 1, None, "default")  # fmt: skip
    outcome = Outcome(lease, Kind.PAGE, page=record, links=[revisit, link])
    assert outcome.revisit() == revisit
    held = HeldLeases()
    held.add(lease)
    store = await open_store(str(tmp_path / "store.db"))
    flusher = Flusher(
        f, store, held, KnownFingerprints(), max_items=10, interval_s=0.1,
        idle=asyncio.Event(), room=asyncio.Event(), fail=lambda exc: None,
        forced=lambda: False, metrics=None, job="full",
    )  # fmt: skip
    try:
        flusher.add(outcome)
        await flusher.flush()
        assert (await store.counts()).pages == 1
    finally:
        await store.close()
    assert outcome.skipped == Counter({"frontier_full": 2})
    assert flusher.counters.skipped == Counter({"frontier_full": 2})
    assert flusher.full.refused == 2
    stats = await f.stats()
    assert (stats.seen, stats.done, stats.in_flight) == (6, 1, 0)  # nothing pushed, page acked
