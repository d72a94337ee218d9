"""The frontier contract (crawlq.frontier.contract), checked on every backend."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from crawlq.clock import ManualClock, SystemClock
from crawlq.frontier import HostPolicy
from crawlq.frontier.inspection import DeadFilter, DeadLetter
from crawlq.frontier.queue import QueueBounds
from crawlq.frontier.redis import RedisFrontier
from crawlq.frontier.sqlite import SqliteFrontier
from crawlq.request import CrawlRequest, Lease
from crawlq.rules.politeness import Politeness, Strike, StrikePlan
from crawlq.rules.proxies import BenchPlan, ProxyState, parse_proxy

from .conftest import MakeFrontier

VT = 30.0  # visibility timeout, seconds


def reqs(*paths: str, host: str = "a.test", priority: int = 0) -> list[CrawlRequest]:
    return [CrawlRequest(f"http://{host}/{p}", priority=priority) for p in paths]


async def drain(frontier, n: int = 1000) -> list[str]:
    leases = await frontier.lease(n, "w", VT)
    await frontier.ack(leases)
    return [lease.request.url for lease in leases]


async def test_push_dedups_by_canonical_url(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    batch = [
        CrawlRequest("http://a.test/x?b=2&a=1"),
        CrawlRequest("HTTP://A.test/x?a=1&b=2#frag"),  # same canonical URL
        CrawlRequest("http://a.test/y"),
        CrawlRequest("http://a.test/y"),
    ]
    assert await f.push(batch) == 2
    assert await f.push(batch) == 0
    stats = await f.stats()
    assert (stats.queued, stats.seen) == (2, 2)


async def test_seen_includes_done_and_dead(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    await f.push(reqs("a", "b"))
    a, b = await f.lease(2, "w", VT)
    await f.ack([a])
    await f.dead(b, "http_404")
    assert await f.push(reqs("a", "b")) == 0
    stats = await f.stats()
    assert (stats.done, stats.dead, stats.pending, stats.seen) == (1, 1, 0, 2)


async def test_concurrent_pushes_of_one_url_queue_it_once(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    batch = reqs(*(f"p{i}" for i in range(200)))
    counts = await asyncio.gather(*(f.push(batch) for _ in range(8)))
    assert sum(counts) == 200
    leased = await f.lease(1000, "w", VT)
    assert sorted(le.request.url for le in leased) == sorted(r.url for r in batch)


async def test_priority_then_fifo_within_a_host(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    await f.push(reqs("low1", "low2", priority=0))
    await f.push(reqs("high1", "high2", priority=5))
    await f.push(reqs("mid", priority=2))
    assert [u.rsplit("/", 1)[1] for u in await drain(f)] == [
        "high1",
        "high2",
        "mid",
        "low1",
        "low2",
    ]


async def test_priority_across_ready_hosts(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 1))
    await f.push(reqs("x", host="a.test", priority=1))
    await f.push(reqs("y", host="b.test", priority=9))
    await f.push(reqs("z", host="c.test", priority=4))
    first = await f.lease(1, "w", VT)
    assert first[0].request.url == "http://b.test/y"
    second = await f.lease(1, "w", VT)
    assert second[0].request.url == "http://c.test/z"


async def test_lease_n_returns_at_most_n(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    await f.push(reqs(*(str(i) for i in range(10))))
    assert len(await f.lease(3, "w", VT)) == 3
    assert len(await f.lease(100, "w", VT)) == 7
    assert await f.lease(100, "w", VT) == []


async def test_host_concurrency_limits_leases_until_settled(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 2))
    await f.push(reqs("1", "2", "3", "4"))
    await f.push(reqs("b1", host="b.test"))
    first = await f.lease(10, "w", VT)
    assert len([le for le in first if le.request.host == "a.test"]) == 2
    assert len([le for le in first if le.request.host == "b.test"]) == 1
    assert await f.lease(10, "w", VT) == []
    await f.ack(first[:1])
    again = await f.lease(10, "w", VT)
    assert len(again) == (1 if first[0].request.host == "a.test" else 0)


async def test_fetched_frees_the_host_slot_and_keeps_the_lease(
    make_frontier: MakeFrontier,
) -> None:
    clock = ManualClock()
    f = await make_frontier(policy=HostPolicy(0.0, 1), clock=clock)
    await f.push(reqs("1", "2", "3"))
    (first,) = await f.lease(10, "w", VT)
    assert await f.lease(10, "w", VT) == []  # one slot, taken
    (second,) = await f.lease(10, "w", VT, fetched=[first])
    hosts = {h.host: h.in_flight for h in (await f.stats()).hosts}
    assert hosts["a.test"] == 1  # the second request's slot; the first one's was given back
    assert (await f.stats()).in_flight == 2  # both leases are still held
    assert await f.ack([first]) == 1  # its slot is not freed twice ...
    assert await f.lease(10, "w", VT) == []  # ... so the second still holds the only slot
    assert await f.lease(10, "w", VT, fetched=[first]) == []  # settled: ignored
    (third,) = await f.lease(10, "w", VT, fetched=[second])
    assert third.request.url == "http://a.test/3"
    assert [le.request.url for le in await f.renew([second], VT)] == ["http://a.test/2"]
    await f.release([second])  # a fetched lease can still be released, retried, expired
    clock.advance(VT)
    (again,) = await f.lease(10, "w", VT)  # third expired: its slot came back exactly once
    assert again.request.url in ("http://a.test/2", "http://a.test/3")
    assert await f.lease(10, "w", VT) == []
    stats = await f.stats()
    assert (stats.queued, stats.in_flight, stats.done) == (1, 1, 1)
    assert {h.host: h.in_flight for h in stats.hosts}["a.test"] == 1


async def test_fetched_then_expired_does_not_free_a_slot_twice(
    make_frontier: MakeFrontier,
) -> None:
    clock = ManualClock()
    f = await make_frontier(policy=HostPolicy(0.0, 2), clock=clock)
    await f.push(reqs("1", "2", "3", "4"))
    a, _b = await f.lease(10, "w", VT)
    assert len(await f.lease(10, "w", VT, fetched=[a])) == 1  # c, in a's slot
    clock.advance(VT)  # all three expire: a had given its slot back already, b and c not
    leased = await f.lease(10, "w2", VT)
    assert len(leased) == 2  # two slots, no more: a's slot was not freed a second time
    assert await f.lease(10, "w2", VT) == []
    assert {h.host: h.in_flight for h in (await f.stats()).hosts}["a.test"] == 2


async def test_delay_spaces_lease_starts_per_host(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(policy=HostPolicy(2.0, 10), clock=clock)
    await f.push(reqs("1", "2", "3"))
    await f.push(reqs("b1", host="b.test"))
    first = await f.lease(10, "w", VT)
    assert sorted(le.request.host for le in first) == ["a.test", "b.test"]  # one per host
    clock.advance(1.999)
    assert await f.lease(10, "w", VT) == []
    clock.advance(0.001)
    assert [le.request.url for le in await f.lease(10, "w", VT)] == ["http://a.test/2"]


async def test_host_policy_override(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(policy=HostPolicy(0.0, 10), clock=clock)
    await f.set_host_policy("a.test", HostPolicy(5.0, 1))
    await f.push(reqs("1", "2"))
    assert len(await f.lease(10, "w", VT)) == 1
    clock.advance(4.0)
    assert await f.lease(10, "w", VT) == []


async def test_expired_lease_is_redelivered_with_attempt_counted(
    make_frontier: MakeFrontier,
) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    await f.push(reqs("x"))
    (lease,) = await f.lease(1, "dead-worker", 10.0)
    assert lease.attempt == 1
    clock.advance(9.9)
    assert await f.lease(1, "w2", 10.0) == []
    clock.advance(0.1)
    (again,) = await f.lease(1, "w2", 10.0)
    assert again.request == lease.request
    assert again.attempt == 2
    assert await f.ack([lease]) == 0  # the old holder lost it
    assert await f.ack([again]) == 1
    assert (await f.stats()).done == 1


async def test_renew_keeps_a_slow_lease(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    await f.push(reqs("slow"))
    (lease,) = await f.lease(1, "w", 10.0)
    clock.advance(8)
    (renewed,) = await f.renew([lease], 10.0)
    assert renewed.deadline_ms == lease.deadline_ms + 8000
    clock.advance(8)
    assert await f.lease(1, "w2", 10.0) == []
    assert await f.ack([renewed]) == 1
    assert await f.renew([lease], 10.0) == []


async def test_retry_waits_for_its_delay(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    await f.push(reqs("flaky"))
    (lease,) = await f.lease(1, "w", VT)
    assert await f.retry(lease, 5.0, "http_503")
    stats = await f.stats()
    assert (stats.delayed, stats.in_flight, stats.pending) == (1, 0, 1)
    clock.advance(4.9)
    assert await f.lease(1, "w", VT) == []
    clock.advance(0.1)
    (again,) = await f.lease(1, "w", VT)
    assert again.attempt == 2
    assert not await f.retry(lease, 1.0, "stale lease")


async def test_dead_letter(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    await f.push(reqs("gone"))
    (lease,) = await f.lease(1, "w", VT)
    assert await f.dead(lease, "http_404")
    assert not await f.dead(lease, "again")
    stats = await f.stats()
    assert (stats.dead, stats.pending) == (1, 0)
    assert await f.lease(1, "w", VT) == []


async def test_release_does_not_count_an_attempt(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    await f.push(reqs("a", "b"))
    leases = await f.lease(2, "w", VT)
    assert await f.release(leases) == 2
    again = await f.lease(2, "w", VT)
    assert [le.attempt for le in again] == [1, 1]
    assert [le.request.url for le in again] == [le.request.url for le in leases]


async def test_request_round_trips_through_the_frontier(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    original = CrawlRequest(
        "http://a.test/form",
        method="post",
        body=b"q=1\x00",
        priority=-3,
        depth=4,
        callback="parse_item",
        cb_kwargs={"k": [1, 2]},
        meta={"m": "é"},
    )
    await f.push([original])
    (lease,) = await f.lease(1, "w", VT)
    got = lease.request
    assert got == original
    assert got.fingerprint == original.fingerprint


async def test_stats_per_host(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 1))
    await f.push(reqs("1", "2", "3", host="a.test"))
    await f.push(reqs("1", host="b.test"))
    await f.lease(10, "w", VT)
    hosts = {h.host: (h.queued, h.in_flight) for h in (await f.stats()).hosts}
    assert hosts == {"a.test": (2, 1), "b.test": (0, 1)}


async def test_blocked_lease_wakes_on_push(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(clock=SystemClock())
    waiter = asyncio.create_task(f.lease(1, "w", VT, wait_s=5.0))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    start = time.monotonic()
    await f.push(reqs("late"))
    (lease,) = await asyncio.wait_for(waiter, 2.0)
    assert lease.request.url == "http://a.test/late"
    assert time.monotonic() - start < 0.5


async def test_blocked_lease_wakes_when_host_window_opens(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(policy=HostPolicy(0.3, 1), clock=SystemClock())
    await f.push(reqs("1", "2"))
    (first,) = await f.lease(5, "w", VT)
    await f.ack([first])
    start = time.monotonic()
    (second,) = await f.lease(5, "w", VT, wait_s=5.0)
    waited = time.monotonic() - start
    assert second.request.url == "http://a.test/2"
    assert 0.2 <= waited < 1.0


async def test_blocked_lease_returns_when_the_last_lease_is_settled(
    make_frontier: MakeFrontier,
) -> None:
    """A worker waiting on its own last lease learns at once that nothing is left."""
    f = await make_frontier(clock=SystemClock())
    await f.push(reqs("only"))
    (lease,) = await f.lease(1, "w", VT)
    waiter = asyncio.create_task(f.lease(1, "w", VT, wait_s=60.0))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await f.ack([lease])
    assert await asyncio.wait_for(waiter, 10.0) == []
    assert (await f.stats()).pending == 0


async def test_round_trips_count_backend_requests(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    before = f.round_trips
    await f.push(reqs("a", "b", "c"))
    leases = await f.lease(3, "w", VT)
    await f.ack(leases)
    # one push, at least one lease step, one ack: batching keeps it a handful, not per URL
    assert 3 <= f.round_trips - before <= 8


async def test_lease_until_drained_does_not_wait_on_a_drained_frontier(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(clock=SystemClock())
    await f.push(reqs("only"))
    await f.ack(await f.lease(1, "w", VT))
    start = time.monotonic()
    assert await f.lease(1, "w", VT, wait_s=30.0, until_drained=True) == []
    assert time.monotonic() - start < 5.0  # not the 30 s wait


async def test_blocked_lease_times_out_empty(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(clock=SystemClock())
    start = time.monotonic()
    assert await f.lease(1, "w", VT, wait_s=0.2) == []
    assert 0.15 <= time.monotonic() - start < 1.0


async def test_host_strike_pauses_the_host_for_every_worker(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    await f.push(reqs("a", "b", "c") + reqs("x", host="b.test"))
    first = await f.lease(1, "w1", VT)
    assert await f.host_strike("a.test", Strike.PUSHBACK, StrikePlan((3.0,))) == 1
    await f.retry(first[0], 0.0, "http_429")
    got = await f.lease(10, "w2", VT)
    assert [le.request.host for le in got] == ["b.test"]  # the other host is not held back
    clock.advance(2.999)
    assert await f.lease(10, "w2", VT) == []
    clock.advance(0.001)
    assert sorted(le.request.url for le in await f.lease(10, "w2", VT)) == [
        "http://a.test/a",
        "http://a.test/b",
        "http://a.test/c",
    ]


async def test_host_strikes_count_in_a_row_until_the_host_answers(
    make_frontier: MakeFrontier,
) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    await f.push(reqs("a", "b"))
    plan = StrikePlan((1.0, 2.0, 4.0))
    assert await f.host_strike("a.test", Strike.PUSHBACK, plan) == 1
    assert await f.host_strike("a.test", Strike.PUSHBACK, plan) == 2
    assert await f.host_strike("a.test", Strike.FAILURE, plan) == 1  # counted apart
    clock.advance(1.999)
    assert await f.lease(10, "w", VT) == []  # the pause only grows: 2 s after the 2nd
    clock.advance(0.001)
    leases = await f.lease(1, "w", VT)
    await f.ack(leases)  # the host answered
    assert await f.host_strike("a.test", Strike.PUSHBACK, plan) == 1
    assert await f.host_strike("a.test", Strike.FAILURE, plan) == 1


async def test_a_shorter_pause_keeps_a_later_next_allowed_time(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    await f.push(reqs("a"))
    await f.host_strike("a.test", Strike.PUSHBACK, StrikePlan((5.0,)))
    await f.host_strike("a.test", Strike.FAILURE, StrikePlan((1.0,)))
    clock.advance(4.9)
    assert await f.lease(10, "w", VT) == []
    clock.advance(0.1)
    assert len(await f.lease(10, "w", VT)) == 1


async def test_a_probing_host_takes_one_request_at_a_time(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    await f.push(reqs("a", "b", "c", "d"))
    await f.host_strike("a.test", Strike.FAILURE, StrikePlan((10.0,), probe_from=1))
    await f.set_host_policy("a.test", HostPolicy(0.0, 50))  # keeps the breaker's flag
    clock.advance(10.0)
    probe = await f.lease(10, "w", VT)
    assert len(probe) == 1
    assert await f.lease(10, "w", VT) == []  # one at a time until it answers
    await f.ack(probe)
    assert len(await f.lease(10, "w", VT)) == 3  # answered: the breaker is closed


async def test_a_down_host_is_drained_at_once_flagged(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(policy=HostPolicy(60.0, 1), clock=clock)
    await f.push(reqs("a", "b", "c") + reqs("x", host="b.test"))
    first = await f.lease(10, "w", VT)
    assert len(first) == 2  # one per host
    plan = StrikePlan((30.0,), probe_from=1, down_from=1)
    await f.host_strike("a.test", Strike.FAILURE, plan)
    await f.dead(next(le for le in first if le.request.host == "a.test"), "host_unreachable")
    await f.ack([le for le in first if le.request.host == "b.test"])
    drained = await f.lease(10, "w", VT)
    assert sorted(le.request.url for le in drained) == ["http://a.test/b", "http://a.test/c"]
    assert all(le.host_down for le in drained)
    for lease in drained:
        await f.dead(lease, "host_unreachable")
    await f.push(reqs("later"))  # found later: handed out flagged too
    (later,) = await f.lease(10, "w", VT)
    assert later.host_down
    await f.dead(later, "host_unreachable")
    assert (await f.replay_dead()).queued == 4  # the operator says the site is back
    clock.advance(60.0)
    again = await f.lease(10, "w", VT)
    assert len(again) == 1 and not again[0].host_down  # politeness as before


async def test_per_host_overrides_apply_when_a_host_is_first_pushed(
    make_frontier: MakeFrontier,
) -> None:
    rules = Politeness(default=HostPolicy(0.0, 100), overrides={"slow.test": HostPolicy(5.0, 1)})
    f = await make_frontier(politeness=rules)
    await f.push(reqs("a", "b", "c") + reqs("a", "b", "c", host="www.slow.test"))
    leased = await f.lease(100, "w", VT)
    hosts = sorted(le.request.host for le in leased)
    assert hosts == ["a.test", "a.test", "a.test", "www.slow.test"]


async def test_replay_dead_requeues_every_dead_letter_afresh(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    await f.push(reqs("a", "b", "c"))
    leases = await f.lease(3, "w", VT)
    await f.dead(leases[0], "connect_error")
    await f.dead(leases[1], "http_503")
    await f.ack(leases[2:])
    assert (await f.replay_dead()).queued == 2
    stats = await f.stats()
    assert (stats.dead, stats.queued, stats.done) == (0, 2, 1)
    again = await f.lease(3, "w", VT)
    assert sorted(le.request.url for le in again) == sorted(le.request.url for le in leases[:2])
    assert [le.attempt for le in again] == [1, 1]
    assert (await f.replay_dead()).queued == 0


# -- inspect, dead letters and their replay ------------------------------------------------


async def test_inspect_tells_each_state(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(policy=HostPolicy(2.0, 5), clock=clock)
    home = "http://a.test/index.html"
    names = ("lease", "retry", "dead", "done", "queued")  # leased in this order (FIFO)
    linked = [
        CrawlRequest(f"http://a.test/{name}", priority=-1, depth=1, referrer=home) for name in names
    ]
    fp = {name: r.fingerprint for name, r in zip(names, linked, strict=True)}
    never = CrawlRequest("http://a.test/never").fingerprint
    assert await f.inspect(never) == type(await f.inspect(never))(never, "unseen")
    await f.push(linked)
    first = await f.inspect(fp["queued"])
    assert (first.state, first.attempts, first.ready_at_ms) == ("queued", 0, 0)
    assert first.request is not None and first.request.url == "http://a.test/queued"
    assert (first.request.priority, first.request.depth) == (-1, 1)
    assert first.request.referrer == home
    leases: dict[str, Lease] = {}
    for name in names[:4]:  # one lease per 2 s politeness window of the host
        if leases:
            clock.advance(2.0)
        (lease,) = await f.lease(1, "w1", VT)
        assert lease.request.url == f"http://a.test/{name}"
        leases[name] = lease
    now = clock.wall_ms()

    held = await f.inspect(fp["lease"])
    assert (held.state, held.worker_id, held.attempts) == ("in_flight", "w1", 1)
    assert held.deadline_ms == leases["lease"].deadline_ms
    assert held.request is not None and held.request.referrer == home

    queued = await f.inspect(fp["queued"])
    assert queued.state == "queued" and queued.ready_at_ms == now + 2000  # the host's window

    assert await f.retry(leases["retry"], 30.0, "http_503")
    delayed = await f.inspect(fp["retry"])
    assert (delayed.state, delayed.attempts, delayed.reason) == ("delayed", 1, "http_503")
    assert delayed.ready_at_ms == now + 30_000

    assert await f.dead(leases["dead"], "timeout")
    dead = await f.inspect(fp["dead"])
    assert (dead.state, dead.attempts, dead.reason, dead.dead_at_ms) == ("dead", 1, "timeout", now)
    assert dead.request is not None and dead.request.referrer == home

    assert await f.ack([leases["done"]]) == 1
    done = await f.inspect(fp["done"])
    assert (done.state, done.exact, done.request, done.reason) == ("done", True, None, None)

    assert await f.ack([leases["lease"]]) == 1
    clock.advance(30.0)  # the retry falls due and goes back to the queue, its reason kept
    (again,) = await f.lease(1, "w2", VT)  # priority then FIFO: the retry was pushed first
    assert again.request.url == "http://a.test/retry"
    assert await f.release([again]) == 1
    back = await f.inspect(fp["retry"])
    assert (back.state, back.attempts, back.reason) == ("queued", 1, "http_503")


async def _dead_letters(f, where: DeadFilter = DeadFilter()) -> list[tuple[str, str]]:  # noqa: B008
    return sorted([(d.request.url, d.reason) async for d in f.dead_letters(where)])


async def test_dead_letters_filter_by_reason_host_and_time(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    ref = "http://a.test/"
    await f.push(
        [CrawlRequest(f"http://{h}/{p}", referrer=ref) for h in ("a.test", "b.test:8080")
         for p in ("x", "y")]
    )  # fmt: skip
    leases = {le.request.url: le for le in await f.lease(10, "w", VT)}
    t0 = clock.wall_ms()
    await f.dead(leases["http://a.test/x"], "http_503")
    await f.dead(leases["http://b.test:8080/x"], "http_503")
    clock.advance(60.0)
    await f.dead(leases["http://a.test/y"], "connect_error")
    await f.ack([leases["http://b.test:8080/y"]])
    everything = await _dead_letters(f)
    assert everything == [
        ("http://a.test/x", "http_503"),
        ("http://a.test/y", "connect_error"),
        ("http://b.test:8080/x", "http_503"),
    ]
    assert await _dead_letters(f, DeadFilter(reason="http_503")) == [
        ("http://a.test/x", "http_503"),
        ("http://b.test:8080/x", "http_503"),
    ]
    only_b = await _dead_letters(f, DeadFilter(host="B.test"))
    assert only_b == [("http://b.test:8080/x", "http_503")]
    assert await _dead_letters(f, DeadFilter(host="b.test:8081")) == []
    assert await _dead_letters(f, DeadFilter(since_ms=t0 + 1)) == [
        ("http://a.test/y", "connect_error")
    ]
    assert await _dead_letters(f, DeadFilter(reason="http_503", host="a.test", since_ms=t0)) == [
        ("http://a.test/x", "http_503")
    ]
    letters = [d async for d in f.dead_letters(DeadFilter(reason="connect_error"))]
    assert [(d.attempts, d.dead_at_ms, d.request.referrer) for d in letters] == [
        (1, t0 + 60_000, ref)
    ]


async def test_replay_dead_by_filter_and_admission(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    await f.push(reqs("a", "b", "c") + reqs("d", host="b.test"))
    for lease in await f.lease(10, "w", VT):
        await f.dead(lease, "connect_error" if lease.request.url.endswith("/c") else "http_503")
    assert (await f.replay_dead(DeadFilter(reason="http_503", host="b.test"))).queued == 1
    assert await _dead_letters(f, DeadFilter(host="b.test")) == []
    refused: list[str] = []

    def admit(letter: DeadLetter) -> bool:  # the caller's scope: /b left out
        assert letter.reason == "http_503"
        if letter.request.url.endswith("/b"):
            refused.append(letter.request.url)
            return False
        return True

    assert (await f.replay_dead(DeadFilter(reason="http_503"), admit)).queued == 1
    assert refused == ["http://a.test/b"]
    assert await _dead_letters(f) == [
        ("http://a.test/b", "http_503"),
        ("http://a.test/c", "connect_error"),
    ]
    stats = await f.stats()
    assert (stats.dead, stats.queued) == (2, 2)
    again = await f.lease(10, "w", VT)
    assert sorted(le.request.url for le in again) == ["http://a.test/a", "http://b.test/d"]
    assert [le.attempt for le in again] == [1, 1]  # attempts counted afresh
    state = await f.inspect(again[0].request.fingerprint)
    assert (state.state, state.reason, state.dead_at_ms) == ("in_flight", None, None)
    assert (await f.replay_dead(DeadFilter(reason="http_503", host="b.test"))).queued == 0
    assert await f.push(reqs("a") + reqs("d", host="b.test")) == 0  # seen: dedup holds


# -- robots.txt records: one copy per origin per job ----------------------------------------


async def test_robots_record_round_trip_and_replace(make_frontier: MakeFrontier) -> None:
    from crawlq.frontier.robots import RobotsRecord

    f = await make_frontier()
    assert await f.robots_get("http://a.test") is None
    body = "User-agent: *\nDisallow: /é/\n" + "# " + "x" * (500 * 1024) + "\n"
    first = RobotsRecord("parsed", 1_700_000_000_000, 1_700_086_400_000, body=body)
    await f.robots_put("http://a.test", first)
    assert await f.robots_get("http://a.test") == first
    assert await f.robots_get("https://a.test") is None  # origins are separate (RFC 9309 §2.3)
    assert await f.robots_get("http://a.test:8080") is None
    second = RobotsRecord("unreachable", 5, 6, detail="http_503")
    await f.robots_put("http://a.test", second)
    assert await f.robots_get("http://a.test") == second


async def test_robots_claim_is_single_flight_until_put_or_expiry(
    make_frontier: MakeFrontier,
) -> None:
    from crawlq.frontier.robots import RobotsRecord

    clock = ManualClock()
    f = await make_frontier(clock=clock)
    origin = "http://a.test"
    got = await asyncio.gather(*(f.robots_claim(origin, f"w{i}", 30.0) for i in range(8)))
    assert sorted(claimed for _, claimed in got) == [False] * 7 + [True]
    assert all(record is None for record, _ in got)
    winner = f"w{[claimed for _, claimed in got].index(True)}"
    assert await f.robots_claim(origin, winner, 30.0) == (None, True)  # the holder extends it
    assert await f.robots_claim(origin, "late", 30.0) == (None, False)
    assert await f.robots_claim("http://b.test", "late", 30.0) == (None, True)  # per origin
    now = clock.wall_ms()
    record = RobotsRecord("unavailable", now, now + 60_000, detail="status 404")
    await f.robots_put(origin, record)  # ends the claim
    # fresh: everyone reads it, nobody claims
    assert await f.robots_claim(origin, "late", 30.0) == (record, False)
    assert await f.robots_get(origin) == record
    clock.advance(60)  # expired: the first to ask claims, and gets the stale copy
    assert await f.robots_claim(origin, "late", 30.0) == (record, True)
    assert await f.robots_claim(origin, winner, 30.0) == (record, False)
    clock.advance(29.9)
    assert await f.robots_claim(origin, winner, 30.0) == (record, False)
    clock.advance(0.2)  # the claimer died: its claim lapses
    assert await f.robots_claim(origin, winner, 30.0) == (record, True)


async def test_robots_claim_distrusts_a_record_valid_beyond_24_hours(
    make_frontier: MakeFrontier,
) -> None:
    from crawlq.frontier.robots import RobotsRecord

    clock = ManualClock()
    f = await make_frontier(clock=clock)
    now = clock.wall_ms()
    forever = RobotsRecord("parsed", now, now + 25 * 3600 * 1000, body="User-agent: *\n")
    await f.robots_put("http://a.test", forever)
    assert await f.robots_claim("http://a.test", "w", 30.0) == (forever, True)


async def test_robots_claim_rejects_a_non_positive_ttl(make_frontier: MakeFrontier) -> None:
    import pytest

    f = await make_frontier()
    with pytest.raises(ValueError, match="ttl_s"):
        await f.robots_claim("http://a.test", "w", 0)


# -- queue bounds (backpressure) -------------------------------------------------------------


async def test_block_bound_refuses_a_producers_overflow_without_marking_it_seen(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 100))
    f.bounds = QueueBounds(max_queued=3)
    offer = await f.offer(reqs("a", "b", "c", "d", "e"))
    assert (offer.queued, offer.refused, offer.dropped) == (3, 2, 0)
    stats = await f.stats()
    assert (stats.queued, stats.seen) == (3, 3)
    # a duplicate is never refused, even while full
    assert (await f.offer(reqs("a"))).refused == 0
    # room made by a worker lets the refused ones in: they were never marked seen
    await drain(f, 2)
    again = await f.offer(reqs("a", "b", "c", "d", "e"))
    assert (again.queued, again.refused) == (2, 0)
    assert (await f.stats()).seen == 5


async def test_block_bound_does_not_apply_to_workers_links(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    f.bounds = QueueBounds(max_queued=2)
    assert await f.push(reqs("a", "b", "c", "d")) == 4  # workers make room: never blocked
    assert (await f.offer(reqs("e"))).refused == 1


async def test_per_host_bound_leaves_other_hosts_room(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    f.bounds = QueueBounds(max_queued_per_host=2)
    offer = await f.offer(reqs("1", "2", "3", host="a.test") + reqs("1", host="b.test"))
    assert (offer.queued, offer.refused) == (3, 1)
    hosts = {h.host: h.queued for h in (await f.stats()).hosts}
    assert hosts == {"a.test": 2, "b.test": 1}


async def test_drop_lowest_dead_letters_the_lowest_priority_and_loses_nothing(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 100))
    f.bounds = QueueBounds(max_queued=2, when_full="drop-lowest")
    await f.push(reqs("low", priority=0) + reqs("mid", priority=5))
    offer = await f.offer(reqs("high", priority=9))  # evicts "low"
    assert (offer.queued, offer.refused, offer.dropped) == (1, 0, 1)
    assert await f.push(reqs("lower", priority=-1)) == 0  # the new one is the lowest: dropped
    stats = await f.stats()
    assert (stats.queued, stats.dead, stats.seen) == (2, 2, 4)
    assert sorted(u.rsplit("/", 1)[1] for u in await drain(f)) == ["high", "mid"]
    # the dropped ones are dead letters with their reason, and replayable
    f.bounds = QueueBounds()
    letters = [d async for d in f.dead_letters(DeadFilter(reason="frontier_full"))]
    assert len(letters) == 2 and all(d.dead_at_ms is not None for d in letters)
    assert (await f.replay_dead(DeadFilter(reason="frontier_full"))).queued == 2
    assert sorted(u.rsplit("/", 1)[1] for u in await drain(f)) == ["low", "lower"]


async def test_a_replay_under_a_block_bound_requeues_only_what_fits(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 100))
    await f.push(reqs("d1", "d2", "d3", "d4"))
    for lease in await f.lease(4, "w", VT):
        await f.dead(lease, "http_503")
    f.bounds = QueueBounds(max_queued=3)
    await f.push(reqs("q1", "q2"))
    done = await f.replay_dead()
    assert (done.queued, done.refused, done.dropped) == (1, 3, 0)
    assert done.by_reason == {"http_503": 1}
    stats = await f.stats()
    assert (stats.queued, stats.dead) == (3, 3)
    letters = [d async for d in f.dead_letters()]
    assert [d.reason for d in letters] == ["http_503"] * 3  # left as they were
    await drain(f)  # the workers make room
    done = await f.replay_dead()
    assert (done.queued, done.refused) == (3, 0)
    assert ((await f.stats()).queued, (await f.stats()).dead) == (3, 0)


async def test_a_per_host_bound_holds_for_a_replay(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 100))
    await f.push(reqs("d1", "d2", "d3") + reqs("d1", host="b.test"))
    for lease in await f.lease(4, "w", VT):
        await f.dead(lease, "connect_error")
    f.bounds = QueueBounds(max_queued_per_host=2)
    done = await f.replay_dead()
    assert (done.queued, done.refused) == (3, 1)
    hosts = {h.host: h.queued for h in (await f.stats()).hosts}
    assert hosts == {"a.test": 2, "b.test": 1}


async def test_a_replay_under_drop_lowest_dead_letters_the_lowest(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 100))
    await f.push(reqs("high", priority=9) + reqs("low", priority=-5))
    for lease in await f.lease(2, "w", VT):
        await f.dead(lease, "http_503")
    f.bounds = QueueBounds(max_queued=2, when_full="drop-lowest")
    await f.push(reqs("mid1", "mid2"))
    done = await f.replay_dead()
    # "high" goes back and evicts a queued "mid"; "low" is the lowest: it stays dead
    assert (done.queued, done.refused, done.dropped) == (1, 0, 2)
    assert done.by_reason == {"http_503": 1}
    stats = await f.stats()
    assert (stats.queued, stats.dead) == (2, 2)
    letters = {d.request.url.rsplit("/", 1)[1]: d.reason async for d in f.dead_letters()}
    assert letters == {"low": "frontier_full", "mid2": "frontier_full"}
    assert sorted(u.rsplit("/", 1)[1] for u in await drain(f)) == ["high", "mid1"]


# -- the per-host page budget (max_pages_per_host) --------------------------------------------


def budget(n: int) -> Politeness:
    return Politeness(default=HostPolicy(0.0, 1000), max_pages_per_host=n)


async def test_a_host_admits_at_most_its_budget_of_new_urls(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(politeness=budget(3))
    assert await f.push(reqs("a", "b", "a") + reqs("x", host="b.test")) == 3
    assert await f.push(reqs("c", "d", "e") + reqs("y", "z", host="b.test")) == 3
    stats = await f.stats()
    assert (stats.queued, stats.seen, stats.over_budget) == (6, 6, 2)
    queued = sorted(await drain(f))
    assert queued == sorted(
        [f"http://a.test/{p}" for p in "abc"] + [f"http://b.test/{p}" for p in "xyz"]
    )


async def test_urls_over_the_budget_stay_unseen_and_count_each_time(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(politeness=budget(1))
    assert await f.push(reqs("a", "b")) == 1
    assert await f.push(reqs("a", "b")) == 0  # a: seen (not counted); b: over again
    assert (await f.stats()).over_budget == 2
    assert (await f.stats()).seen == 1


async def test_the_budget_counts_urls_ever_admitted_not_queued_ones(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(politeness=budget(2))
    await f.push(reqs("a"))
    (lease,) = await f.lease(1, "w", VT)
    await f.ack([lease])  # done: still counts against the budget
    assert await f.push(reqs("b", "c")) == 1
    assert await drain(f) == ["http://a.test/b"]


async def test_concurrent_pushes_never_exceed_the_budget(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(politeness=budget(10))
    batches = [reqs(*(f"p{w}-{i}" for i in range(20))) for w in range(6)]
    counts = await asyncio.gather(*(f.push(b) for b in batches))
    assert sum(counts) == 10
    stats = await f.stats()
    assert (stats.queued, stats.over_budget) == (10, 110)


async def test_without_a_budget_nothing_is_over_it(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    assert await f.push(reqs(*(f"p{i}" for i in range(50)))) == 50
    assert (await f.stats()).over_budget == 0


async def test_job_status_carries_the_stats_and_what_the_backend_knows(
    make_frontier: MakeFrontier,
) -> None:
    from crawlq.frontier import job_status

    f = await make_frontier()
    await f.push(reqs("a", "b"))
    (lease,) = await f.lease(1, "w", VT)
    await f.retry(lease, 60.0, "http_503")
    status = await job_status(f)
    assert status.stats == await f.stats()
    assert (status.stats.queued, status.stats.delayed) == (1, 1)
    assert (status.engine, status.pending, status.paused) == ("native", None, False)
    assert status.retries in (None, 1)  # None: the backend does not count retries


async def test_item_keys_go_to_their_first_page_and_stay_its_own(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier()
    page_a, page_b = b"a" * 20, b"b" * 20
    k1, k2, k3 = bytes([1]) * 20, bytes([2]) * 20, bytes([3]) * 20
    assert await f.claim_item_keys([k1, k2], page_a) == [True, True]  # new: page a's
    assert await f.claim_item_keys([k2, k3], page_b) == [False, True]  # k2 is a's
    # page a parsed again (a re-delivered lease, reparse): its keys are still its own
    assert await f.claim_item_keys([k1, k2, k3], page_a) == [True, True, False]
    assert await f.claim_item_keys([], page_a) == []
    # many pages claiming one new key at once: exactly one owns it
    k4 = bytes([4]) * 20
    owners = [bytes([100 + i]) * 20 for i in range(8)]
    got = await asyncio.gather(*(f.claim_item_keys([k4], o) for o in owners))
    assert sorted(g[0] for g in got) == [False] * 7 + [True]
    with pytest.raises(ValueError):
        await f.claim_item_keys([b"short"], page_a)


# Proxies (crawlq.rules.proxies): the shared bench every worker reads.

PROXY_SECRET = "pr0xy-c0ntract-pw"
PLAN = BenchPlan(failures_to_bench=3, bench_ms=1000, max_doublings=2)


def _proxy_id(port: int = 3128) -> str:
    return parse_proxy(f"http://bob:{PROXY_SECRET}@127.0.0.1:{port}").id


async def test_proxy_failures_count_in_a_row_then_bench(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    pid, other = _proxy_id(), _proxy_id(3129)
    now = clock.wall_ms()
    assert await f.proxy_failure(pid, PLAN) == ProxyState(1, 0, 0)
    assert await f.proxy_failure(pid, PLAN) == ProxyState(2, 0, 0)
    assert await f.proxy_failure(other, PLAN) == ProxyState(1, 0, 0)  # counted apart
    benched = await f.proxy_failure(pid, PLAN)
    assert benched == ProxyState(0, 1, now + 1000)
    assert await f.proxy_states() == {pid: benched, other: ProxyState(1, 0, 0)}
    clock.advance(0.5)
    assert await f.proxy_failure(pid, PLAN) == benched  # benched already: counts nothing
    assert (await f.proxy_states())[pid].benched(clock.wall_ms())
    clock.advance(0.5)
    assert not (await f.proxy_states())[pid].benched(clock.wall_ms())


async def test_a_proxy_benched_again_in_a_row_stays_out_longer(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    pid = _proxy_id()
    lengths = []
    for _ in range(4):  # 1 s, 2 s, 4 s, then 4 s again: at most 2 doublings
        for _ in range(PLAN.failures_to_bench):
            state = await f.proxy_failure(pid, PLAN)
        lengths.append(state.until_ms - clock.wall_ms())
        clock.advance(state.until_ms / 1000 - clock.wall_ms() / 1000)
    assert lengths == [1000, 2000, 4000, 4000]
    assert (await f.proxy_states())[pid].benches == 4


async def test_a_proxy_success_resets_its_count_and_bench(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    pid = _proxy_id()
    for _ in range(3):
        await f.proxy_failure(pid, PLAN)
    clock.advance(1.0)
    assert await f.proxy_failure(pid, PLAN) == ProxyState(1, 1, clock.wall_ms())
    await f.proxy_ok(pid)
    assert await f.proxy_states() == {}
    await f.proxy_failure(pid, PLAN)
    await f.proxy_failure(pid, PLAN)
    state = await f.proxy_failure(pid, PLAN)
    assert state == ProxyState(0, 1, clock.wall_ms() + 1000)  # the first bench again, not 2 s
    await f.proxy_ok(_proxy_id(9))  # an unknown proxy: nothing to forget, no error


async def test_the_shared_bench_holds_proxy_ids_never_credentials(
    make_frontier: MakeFrontier, redis_url: str
) -> None:
    f = await make_frontier()
    pid = _proxy_id()
    for _ in range(4):
        await f.proxy_failure(pid, PLAN)
    assert list(await f.proxy_states()) == [pid]
    assert len(pid) == 16 and int(pid, 16) >= 0
    dumped = await _everything_stored(f, redis_url)
    assert pid.encode() in dumped  # the dump holds the bench, so the grep below can fail
    assert PROXY_SECRET.encode() not in dumped and b"bob" not in dumped


async def _everything_stored(f: object, redis_url: str) -> bytes:
    """Every key and value of a Redis job, or every cell of a SQLite frontier, as one blob."""
    if isinstance(f, SqliteFrontier):
        with sqlite3.connect(f.path) as conn:
            named = conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            tables = [r[0] for r in named]
            rows = [
                repr(row).encode() for t in tables for row in conn.execute(f'SELECT * FROM "{t}"')
            ]
        return b"\n".join(rows)
    assert isinstance(f, RedisFrontier)
    client = aioredis.Redis.from_url(redis_url)
    parts: list[Any] = []
    try:
        async for key in client.scan_iter(match=f.keys.pattern()):
            parts.append(key)
            kind = await client.type(key)
            kind = kind.decode() if isinstance(kind, bytes) else kind
            if kind == "hash":
                for k, v in (await client.hgetall(key)).items():
                    parts += [k, v]
            elif kind == "string":
                parts.append(await client.get(key) or b"")
            elif kind == "list":
                parts += await client.lrange(key, 0, -1)
            elif kind == "set":
                parts += list(await client.smembers(key))
            else:
                assert kind == "zset", kind  # every kind the job holds is read
                parts += await client.zrange(key, 0, -1)
    finally:
        await client.aclose()
    return b"\n".join(bytes(p) for p in parts)


POISONS = ["garbage", "1 2", "-1 0 0", "1 2 3 4", "x y z", "\xff\xfe", "", "9" * 40 + " 0 0"]
POISONS += ["0 " + "9" * 40 + " 0", "0 0 " + "9" * 40, "0 0 -5"]


@pytest.mark.parametrize("poison", POISONS)
async def test_a_poisoned_proxy_row_does_not_crash_a_worker(
    make_frontier: MakeFrontier, poison: str
) -> None:
    clock = ManualClock()
    f = await make_frontier(clock=clock)
    pid, good = _proxy_id(), _proxy_id(3129)
    await f.proxy_failure(good, PLAN)
    await _poison(f, pid, poison)
    states = await f.proxy_states()  # a bad row is skipped or read as what it says
    assert states[good] == ProxyState(1, 0, 0)
    assert all(isinstance(v, int) for s in states.values() for v in (s.failures, s.until_ms))
    state = await f.proxy_failure(pid, PLAN)  # and counting goes on from a clean count
    assert state.failures >= 0 and state.benches >= 0 and state.until_ms >= 0
    await f.proxy_ok(pid)
    assert pid not in await f.proxy_states()


async def _poison(f: object, pid: str, value: str) -> None:
    """Write ``value`` as the proxy's row, as a hostile or broken writer could."""
    if isinstance(f, SqliteFrontier):
        with sqlite3.connect(f.path) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO frontier_proxies(id, failures, benches, until_ms)"
                " VALUES (?, ?, ?, ?)",
                (pid, *([*value.split(), "", "", ""][:3])),
            )
        return
    assert isinstance(f, RedisFrontier)
    await f.client.hset(f.keys.proxies, pid, value.encode("latin-1"))
