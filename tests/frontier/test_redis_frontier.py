"""Redis-only behaviour of the frontier: scripts, inbox, wake-ups, restarts, Bloom dedup."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from crawlq.errors import ConfigError, FrontierUnavailable
from crawlq.frontier import HostPolicy
from crawlq.frontier.redis import BloomDedup, Keyspace, RedisFrontier
from crawlq.frontier.redis.idle import _blocking_move
from crawlq.request import CrawlRequest
from tests.services import RedisServer

POLICY = HostPolicy(0.0, 100)


def reqs(*paths: str) -> list[CrawlRequest]:
    return [CrawlRequest(f"http://a.test/{p}") for p in paths]


async def test_every_key_lives_under_the_job_prefix(redis_url: str, job: str) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        await f.push(reqs("1", "2", "3"))
        leases = await f.lease(3, "w", 60)
        await f.ack(leases[:1])
        await f.retry(leases[1], 60, "http_503")
        await f.dead(leases[2], "http_404")
        client = aioredis.Redis.from_url(redis_url)
        keys = [k.decode() async for k in client.scan_iter(match=f"*{job}*")]
        await client.aclose()
        assert keys and all(k.startswith(f"crawlq:{{{job}}}:") for k in keys)
    finally:
        await f.close()


async def test_scripts_reload_after_script_flush(redis_url: str, job: str) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        await f.push(reqs("a"))
        await f.client.script_flush()
        assert await f.push(reqs("b")) == 1  # NOSCRIPT -> SCRIPT LOAD -> EVALSHA
        assert len(await f.lease(10, "w", 60)) == 2
    finally:
        await f.close()


async def test_two_workers_share_one_frontier(redis_url: str, job: str) -> None:
    a = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    b = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        assert await a.push(reqs(*map(str, range(100)))) == 100
        assert await b.push(reqs(*map(str, range(100)))) == 0
        got_a, got_b = await asyncio.gather(a.lease(60, "wa", 60), b.lease(60, "wb", 60))
        urls = [le.request.url for le in got_a + got_b]
        assert len(urls) == 100 and len(set(urls)) == 100  # each leased once
        await a.ack(got_b)  # a lease can be settled through any connection by its id
        stats = await b.stats()
        assert (stats.done, stats.in_flight) == (len(got_b), len(got_a))
    finally:
        await a.close()
        await b.close()


async def test_idle_worker_wakes_when_another_pushes(redis_url: str, job: str) -> None:
    idle = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    producer = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        waiter = asyncio.create_task(idle.lease(1, "idle-worker", 60, wait_s=8))
        await asyncio.sleep(0.3)
        assert not waiter.done()
        start = time.monotonic()
        await producer.push(reqs("wake"))
        (lease,) = await asyncio.wait_for(waiter, 5)
        assert lease.request.url == "http://a.test/wake"
        assert time.monotonic() - start < 1.0
    finally:
        await idle.close()
        await producer.close()


async def test_wait_after_a_missed_last_settle_returns_at_once(redis_url: str, job: str) -> None:
    """The last lease settled between a worker's look and its idle registration (no token
    left for it): the wait sees the job drained and returns instead of sleeping it out."""
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        await f.push(reqs("only"))
        await f.ack(await f.lease(1, "w", 60))  # drained now, and nobody was idle
        start = time.monotonic()
        await f._wait("w", 5.0, pending=True)  # its last look had seen the lease in flight
        assert time.monotonic() - start < 1.0
        start = time.monotonic()
        await f._wait("w", 0.6, pending=False)  # drained all along: block, do not spin
        assert time.monotonic() - start >= 0.4
    finally:
        await f.close()


async def test_raw_lpush_to_the_inbox_gets_crawled(redis_url: str, job: str) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    client = aioredis.Redis.from_url(redis_url)
    try:
        waiter = asyncio.create_task(f.lease(10, "w", 60, wait_s=8))
        await asyncio.sleep(0.3)
        inbox = Keyspace(job).inbox
        start = time.monotonic()
        await client.lpush(inbox, "http://a.test/raw")
        await client.lpush(inbox, json.dumps({"url": "http://a.test/json", "priority": 5}))
        await client.lpush(inbox, "not a url", "ftp://a.test/x", "{broken json")
        await client.lpush(inbox, "http://a.test/raw")  # duplicate: deduplicated
        leases = await asyncio.wait_for(waiter, 5)
        assert time.monotonic() - start < 1.0
        more = await f.lease(10, "w", 60)
        urls = sorted(le.request.url for le in leases + more)
        assert urls == ["http://a.test/json", "http://a.test/raw"]
        assert [le.request.priority for le in leases + more if "json" in le.request.url] == [5]
        rejected = await f.rejected()
        assert sorted(r["entry"] for r in rejected) == [
            "ftp://a.test/x",
            "not a url",
            "{broken json",
        ]
        assert all(r["reason"] for r in rejected)
        assert await client.llen(Keyspace(job).claim("w")) == 0
    finally:
        await client.aclose()
        await f.close()


async def test_inbox_entries_with_fields_of_the_wrong_form_are_rejected_not_fatal(
    redis_url: str, job: str
) -> None:
    # Each of these once got past the inbox and crashed the worker that drained it (or was
    # fetched as an internal error); the valid entries around them must still be queued.
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    client = aioredis.Redis.from_url(redis_url)
    bad: list[dict[str, Any]] = [
        {"url": "http://a.test/1", "cb_kwargs": [1]},
        {"url": "http://a.test/2", "meta": "notadict"},
        {"url": "http://a.test/3", "meta": [1, 2]},
        {"url": "http://a.test/4", "cb_kwargs": "s"},
        {"url": "http://a.test/5", "method": "GET\r\nX: y"},
        {"url": "http://a.test/6", "method": 5},
        {"url": "http://a.test/7", "body_b64": "!!!"},
        {"url": "http://a.test/8", "callback": 7},
    ]
    try:
        inbox = Keyspace(job).inbox
        await client.lpush(inbox, "http://a.test/ok1", *(json.dumps(b) for b in bad))
        await client.lpush(inbox, json.dumps({"url": "http://a.test/ok2", "meta": {"k": 1}}))
        leases = await f.lease(20, "w", 60)
        assert sorted(le.request.url for le in leases) == ["http://a.test/ok1", "http://a.test/ok2"]
        rejected = await f.rejected()
        assert sorted(json.loads(r["entry"])["url"] for r in rejected) == [b["url"] for b in bad]
        assert all(r["reason"] for r in rejected)
        assert await client.llen(Keyspace(job).claim("w")) == 0
    finally:
        await client.aclose()
        await f.close()


async def test_an_inbox_entry_with_a_misspelt_key_is_rejected_naming_it(
    redis_url: str, job: str
) -> None:
    """User trial: ``"priorty": 5`` was queued at priority 0, the key silently dropped."""
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    client = aioredis.Redis.from_url(redis_url)
    documented = {  # README's inbox entry format: every key it names is still taken
        "url": "http://a.test/ok",
        "priority": 5,
        "meta": {"k": "v"},
        "method": "GET",
        "body_b64": "",
        "depth": 1,
        "callback": "parse",
        "cb_kwargs": {"a": 1},
        "referrer": "http://a.test/",
        "headers": {"X-A": "1"},
        "cookies": {"c": "v"},
    }
    try:
        inbox = Keyspace(job).inbox
        await client.lpush(inbox, json.dumps({"url": "http://a.test/typo", "priorty": 5}))
        await client.lpush(inbox, json.dumps(documented))
        leases = await f.lease(10, "w", 60)
        assert [(le.request.url, le.request.priority) for le in leases] == [("http://a.test/ok", 5)]
        [rejected] = await f.rejected()
        assert json.loads(rejected["entry"])["url"] == "http://a.test/typo"
        assert rejected["reason"].startswith("unknown key 'priorty' (did you mean 'priority'?)")
        assert await client.llen(Keyspace(job).claim("w")) == 0
    finally:
        await client.aclose()
        await f.close()


async def test_the_idle_wait_moves_an_entry_without_keeping_it(redis_url: str, job: str) -> None:
    """`_blocking_move` answers whether an element came (nil on timeout), leaves its
    connection clean for the next command, raises the server's error reply, and gives its
    connection back when the wait is cancelled."""
    client = aioredis.Redis.from_url(redis_url, max_connections=1)  # one connection, reused
    k = Keyspace(job)
    big = b"y" * (3 * 1024 * 1024 + 5)  # many chunks of _DROP_CHUNK_BYTES, and a remainder
    try:
        assert await _blocking_move(client, k.inbox, k.claim("w"), 0.1) is False
        await client.lpush(k.inbox, big)
        assert await _blocking_move(client, k.inbox, k.claim("w"), 0.1) is True
        assert await client.lrange(k.claim("w"), 0, -1) == [big]  # moved whole, in Redis
        await client.set(k.inbox, "not a list")
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await _blocking_move(client, k.inbox, k.claim("w"), 0.1)
        assert await client.ping() is True
        await client.delete(k.inbox)
        waiting = asyncio.create_task(_blocking_move(client, k.inbox, k.claim("w"), 30))
        await asyncio.sleep(0.3)
        waiting.cancel()  # a worker shutting down: the connection goes back disconnected
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert await asyncio.wait_for(client.ping(), 10) is True
    finally:
        await client.aclose()


async def test_inbox_claim_of_a_dead_worker_goes_back(redis_url: str, job: str) -> None:
    client = aioredis.Redis.from_url(redis_url)
    keys = Keyspace(job)
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        # A worker took two entries into its claim list and died before pushing them.
        await client.rpush(keys.claim("ghost"), "http://a.test/1", "http://a.test/2")
        await f.renew([], 60, worker_id="alive")  # runs the recovery (first call)
        assert await client.llen(keys.claim("ghost")) == 0
        leases = await f.lease(10, "alive", 60)
        assert sorted(le.request.url for le in leases) == ["http://a.test/1", "http://a.test/2"]
    finally:
        await client.aclose()
        await f.close()


async def test_bloom_dedup(redis_url: str, job: str) -> None:
    bloom = BloomDedup(capacity=10_000, error_rate=0.001)
    assert bloom.hashes == 10 and 143_000 < bloom.bits < 144_000
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, bloom=bloom, create=True)
    try:
        batch = reqs(*map(str, range(2000)))
        assert await f.push(batch) >= 1995  # a false positive is possible, at p <= 0.001 each
        assert await f.push(batch) == 0
        joined = await RedisFrontier.open(redis_url, job)  # a joining worker adopts the mode
        assert joined.bloom == bloom
        assert await joined.push(batch[:10]) == 0
        await joined.close()
        with pytest.raises(ConfigError, match="dedups with bloom"):
            await RedisFrontier.open(redis_url, job, bloom=BloomDedup(capacity=5))
    finally:
        await f.close()


async def test_restart_with_appendonly_loses_nothing() -> None:
    server = RedisServer(appendonly=True)
    server.start()
    try:
        f = await RedisFrontier.open(server.url, "restart", default_policy=POLICY, create=True)
        await f.push(reqs("1", "2", "3"))
        (lease,) = await f.lease(1, "w", 60)
        server.stop()
        with pytest.raises(FrontierUnavailable):
            await f.push(reqs("4"))
        server.start()
        for _ in range(50):  # the client reconnects on its own
            try:
                await f.ack([lease])
                break
            except FrontierUnavailable:
                await asyncio.sleep(0.1)
        stats = await f.stats()
        assert (stats.done, stats.queued, stats.seen) == (1, 2, 3)
        assert await f.push(reqs("1", "4")) == 1
        await f.close()
    finally:
        server.cleanup()


@pytest.mark.parametrize(
    "garbage",
    [
        b"garbage",
        b'{"v":1,"status":"parsed","fetched_at_ms":"soon","expires_at_ms":1}\nUser-agent: *',
        b'{"v":1,"status":"evil","fetched_at_ms":1,"expires_at_ms":2}\n',
        # fresh by its header (the script's view), unreadable here: still claimed
        b'{"v":1,"status":"evil","fetched_at_ms":1,"expires_at_ms":%d}\n'
        % (int(time.time() * 1000) + 3_600_000),
        b'{"v":1,"status":"parsed","fetched_at_ms":1,"expires_at_ms":2}\n\xff\xfe',
        b"\n" * (3 * 1024 * 1024),  # larger than any record: not even transferred
    ],
    ids=["garbage", "bad-time", "evil-stale", "evil-fresh", "bad-utf8", "huge"],  # (xdist: stable)
)
async def test_unreadable_robots_record_is_missing_and_logged_once(
    redis_url: str, job: str, garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    from crawlq.frontier.robots import RobotsRecord

    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.hset(Keyspace(job).robots, "http://a.test", garbage)
        with caplog.at_level("WARNING", logger="crawlq.frontier.redis.robots"):
            assert await f.robots_get("http://a.test") is None
            assert await f.robots_claim("http://a.test", "w", 30.0) == (None, True)
        assert len([r for r in caplog.records if "http://a.test" in r.getMessage()]) == 1
        record = RobotsRecord("parsed", 1, 2, body="User-agent: *\n")
        await f.robots_put("http://a.test", record)  # the refetch replaces it
        assert await f.robots_get("http://a.test") == record
    finally:
        await client.aclose()
        await f.close()


async def test_poison_inbox_entries_are_rejected_and_the_valid_ones_queued(
    redis_url: str, job: str
) -> None:
    """Entries that once raised OverflowError/RecursionError out of the drain (the worker
    died, leaving the valid entries drained with them in its claim list)."""
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    f.inbox_max_entry_bytes = 64 * 1024
    client = aioredis.Redis.from_url(redis_url)
    binary = b"\xff\xfe\x00http://a.test/bin"
    poison: list[bytes] = [
        b'{"url": "http://a.test/p1", "priority": 1e999}',
        b'{"url": "http://a.test/p2", "depth": 1e999}',
        b'{"url": "http://a.test/p3", "priority": NaN}',
        b'{"url": "http://a.test/p4", "priority": true}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"url": "http://a.test/p5", "meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"url": "http://a.test/p6", "meta": {"pad": "' + b"x" * 70_000 + b'"}}',
        binary,
    ]
    try:
        inbox = Keyspace(job).inbox
        await client.lpush(inbox, "http://a.test/ok1", *poison, "http://a.test/ok2")
        leases = await f.lease(20, "w", 60)
        assert sorted(le.request.url for le in leases) == ["http://a.test/ok1", "http://a.test/ok2"]
        rejected = await f.rejected()
        assert len(rejected) == len(poison)
        assert all(r["reason"] for r in rejected)
        by_size = {r["size"]: r for r in rejected}
        assert set(by_size) == {len(p) for p in poison}
        kept = by_size[len(binary)]
        assert kept["encoding"] == "base64" and base64.b64decode(kept["entry"]) == binary
        big = by_size[len(poison[4])]
        assert big["truncated"] is True and big["reason"].startswith("entry_too_large")
        assert len(big["entry"]) == 256  # its first bytes only: Redis gave no more
        assert await client.llen(Keyspace(job).claim("w")) == 0
        assert (await f.stats()).queued == 0
    finally:
        await client.aclose()
        await f.close()


async def test_inbox_filter_rejects_with_its_reason(redis_url: str, job: str) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    f.inbox_filter = lambda r: r if r.host == "a.test" else "out_of_scope: offsite"
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.lpush(Keyspace(job).inbox, "http://a.test/in", "http://b.test/out")
        (lease,) = await f.lease(10, "w", 60)
        assert lease.request.url == "http://a.test/in"
        assert await f.rejected() == [
            {"entry": "http://b.test/out", "reason": "out_of_scope: offsite", "size": 17}
        ]
    finally:
        await client.aclose()
        await f.close()


async def test_inspect_with_bloom_dedup_says_done_is_not_exact(redis_url: str, job: str) -> None:
    bloom = BloomDedup(capacity=10_000, error_rate=0.001)
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, bloom=bloom, create=True)
    try:
        await f.push(reqs("1", "2"))
        first, second = await f.lease(2, "w", 60)
        await f.ack([first])
        done = await f.inspect(first.request.fingerprint)
        assert (done.state, done.exact) == ("done", False)
        assert (await f.inspect(second.request.fingerprint)).state == "in_flight"
        assert (await f.inspect(CrawlRequest("http://a.test/3").fingerprint)).state == "unseen"
    finally:
        await f.close()


async def test_a_garbled_dead_letter_is_skipped_not_fatal(redis_url: str, job: str) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        await f.push(reqs("1", "2"))
        for lease in await f.lease(2, "w", 60):
            await f.dead(lease, "http_503")
        client = aioredis.Redis.from_url(redis_url)
        fp = CrawlRequest("http://a.test/1").fingerprint
        await client.hset(Keyspace(job).dead, fp, b"http_503\na.test\n{not json")
        await client.hset(Keyspace(job).dead_at, fp, b"soon")
        await client.aclose()
        letters = [d.request.url async for d in f.dead_letters()]
        assert letters == ["http://a.test/2"]
        state = await f.inspect(fp)
        assert (state.state, state.request, state.dead_at_ms) == ("dead", None, None)
        assert (await f.replay_dead()).queued == 1  # the garbled one stays where it is
    finally:
        await f.close()


async def test_a_bloom_job_keeps_the_host_budget_too(redis_url: str, job: str) -> None:
    from crawlq.rules.politeness import Politeness

    rules = Politeness(default=POLICY, max_pages_per_host=2)
    bloom = BloomDedup(capacity=10_000, error_rate=0.001)
    f = await RedisFrontier.open(redis_url, job, politeness=rules, bloom=bloom, create=True)
    try:
        urls = [CrawlRequest(f"http://a.test/{i}") for i in range(5)]
        assert await f.push(urls) == 2
        assert await f.push(urls) == 0
        stats = await f.stats()
        assert (stats.queued, stats.over_budget) == (2, 6)
        client = aioredis.Redis.from_url(redis_url)
        try:
            assert await client.hget(Keyspace(job).admitted, "a.test") == b"2"
        finally:
            await client.aclose()
    finally:
        await f.drop()
        await f.close()


async def test_a_garbled_host_count_does_not_fail_a_push(redis_url: str, job: str) -> None:
    from crawlq.rules.politeness import Politeness

    rules = Politeness(default=POLICY, max_pages_per_host=3)
    f = await RedisFrontier.open(redis_url, job, politeness=rules, create=True)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.hset(Keyspace(job).admitted, "a.test", "not a number")
        assert await f.push([CrawlRequest(f"http://a.test/{i}") for i in range(5)]) == 3
        assert await client.hget(Keyspace(job).admitted, "a.test") == b"3"
    finally:
        await client.aclose()
        await f.drop()
        await f.close()


async def test_redis_job_status_reports_throughput_workers_and_retries(
    redis_url: str, job: str
) -> None:
    from crawlq.frontier import job_status

    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        await f.push([CrawlRequest("http://a.test/1"), CrawlRequest("http://a.test/2")])
        first = (await f.lease(1, "w1", 30.0))[0]
        await f.renew([first], 30.0)  # records w1's heartbeat
        await f.ack([first])
        second = (await f.lease(1, "w1", 30.0))[0]
        await f.retry(second, 60.0, "http_503")
        status = await job_status(f)
        assert status.retries == 1
        assert [w.worker_id for w in status.workers] == ["w1"]
        assert status.pages_per_s is not None and status.pages_per_s > 0
        assert (status.engine, status.pending, status.paused) == ("native", None, False)
    finally:
        await f.close()


def test_claims_pattern_matches_the_claim_lists_of_its_job_only() -> None:
    from fnmatch import fnmatchcase

    k = Keyspace("j")
    pattern = k.claims_pattern().replace("\\{", "[{]").replace("\\}", "[}]")
    assert fnmatchcase(k.claim("w1"), pattern)
    assert not fnmatchcase(Keyspace("j2").claim("w1"), pattern)
    assert not fnmatchcase(k.inbox, pattern)
    assert k.claim_worker(k.claim("w1").encode()) == "w1"


async def test_a_young_jobs_rate_is_over_its_own_seconds_and_a_closed_worker_leaves(
    redis_url: str, job: str
) -> None:
    from crawlq.clock import ManualClock
    from crawlq.frontier import job_status

    clock = ManualClock(1_700_000_000_000)
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True, clock=clock)
    watcher = await RedisFrontier.open(redis_url, job, clock=clock)
    try:
        await f.push([CrawlRequest(f"http://a.test/{i}") for i in range(3)])
        leases = await f.lease(3, "w1", 30.0)
        await f.renew(leases, 30.0)  # w1's heartbeat
        await f.ack(leases)
        clock.advance(4.0)  # 3 pages in the job's first 5 seconds: 0.6/s, not 3/60
        status = await job_status(watcher)
        assert status.pages_per_s == pytest.approx(0.6)
        assert [w.worker_id for w in status.workers] == ["w1"]
        await f.close()  # a worker that stops leaves the live workers at once (its beat is fresh)
        assert (await job_status(watcher)).workers == ()
        clock.advance(100.0)  # nothing acked within the last minute
        assert (await job_status(watcher)).pages_per_s == 0.0
    finally:
        await f.close()
        await watcher.close()


async def test_a_corrupt_request_record_is_dead_lettered_not_fatal(
    redis_url: str, job: str, caplog: pytest.LogCaptureFixture
) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=HostPolicy(0.0, 1), create=True)
    try:
        reqs = [CrawlRequest(f"http://a.test/{i}") for i in range(5)]
        await f.push(reqs[:4])
        k = Keyspace(job)
        other = CrawlRequest("http://a.test/elsewhere").to_json().encode()
        await f.client.hset(k.reqs, reqs[0].fingerprint, b'a.test\n{"url": 5}')
        await f.client.hset(k.reqs, reqs[1].fingerprint, b"\xff\xfe garbage")
        await f.client.hset(k.reqs, reqs[2].fingerprint, b"a.test\n" + other)
        got = []
        for _ in range(4):  # host concurrency 1: a corrupt record must not hold the slot
            got += await f.lease(1, "w1", 30.0)
            await f.ack(got[-1:])
        await f.push(reqs[4:])
        got += await f.lease(1, "w1", 30.0)
        assert [lease.request.url for lease in got] == ["http://a.test/3", "http://a.test/4"]
        stats = await f.stats()
        assert (stats.dead, stats.in_flight, stats.queued) == (3, 1, 0)
    finally:
        await f.close()
    corrupt = [r.getMessage() for r in caplog.records if "corrupt_request" in r.getMessage()]
    assert len(corrupt) == 3, corrupt
    assert any("a request of another URL (http://a.test/elsewhere)" in m for m in corrupt)


async def test_a_close_cancelled_midway_still_raises_the_cancellation(
    redis_url: str, job: str
) -> None:
    """Ctrl-C of ``status --watch`` landing in ``close`` must end the command (issue 21).

    The close used to swallow ``CancelledError``, so the cancelled task went on as if nothing
    had been asked: ``status --watch`` kept printing tables after SIGINT.
    """
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    await f.stats()  # a connection in the pool: closing it waits on the socket
    closing = asyncio.create_task(f.close())
    await asyncio.sleep(0)
    assert not closing.done()  # suspended inside close
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    # the pool was closed all the same: no socket is left open (a ResourceWarning would fail
    # this test under filterwarnings=error)
    assert all(c._writer is None for c in f.client.connection_pool._available_connections)
