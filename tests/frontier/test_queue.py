"""The work queue contract (`crawlq.frontier.queue.WorkQueue`), checked on every backend."""

from __future__ import annotations

import asyncio
import time

from crawlq.clock import ManualClock, SystemClock
from crawlq.frontier import HostPolicy
from crawlq.frontier.inspection import DeadFilter
from crawlq.frontier.queue import QueueBounds
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import Politeness

from .conftest import VT, MakeFrontier, drain, reqs


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


async def test_block_bound_refuses_a_producers_overflow_without_marking_it_seen(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 100), bounds=QueueBounds(max_queued=3))
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
    f = await make_frontier(bounds=QueueBounds(max_queued=2))
    assert await f.push(reqs("a", "b", "c", "d")) == 4  # workers make room: never blocked
    assert (await f.offer(reqs("e"))).refused == 1


async def test_per_host_bound_leaves_other_hosts_room(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(bounds=QueueBounds(max_queued_per_host=2))
    offer = await f.offer(reqs("1", "2", "3", host="a.test") + reqs("1", host="b.test"))
    assert (offer.queued, offer.refused) == (3, 1)
    hosts = {h.host: h.queued for h in (await f.stats()).hosts}
    assert hosts == {"a.test": 2, "b.test": 1}


async def test_drop_lowest_dead_letters_the_lowest_priority_and_loses_nothing(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(
        policy=HostPolicy(0.0, 100), bounds=QueueBounds(max_queued=2, when_full="drop-lowest")
    )
    await f.push(reqs("low", priority=0) + reqs("mid", priority=5))
    offer = await f.offer(reqs("high", priority=9))  # evicts "low"
    assert (offer.queued, offer.refused, offer.dropped) == (1, 0, 1)
    assert await f.push(reqs("lower", priority=-1)) == 0  # the new one is the lowest: dropped
    stats = await f.stats()
    assert (stats.queued, stats.dead, stats.seen) == (2, 2, 4)
    assert sorted(u.rsplit("/", 1)[1] for u in await drain(f)) == ["high", "mid"]
    # the dropped ones are dead letters with their reason, and replayable
    letters = [d async for d in f.dead_letters(DeadFilter(reason="frontier_full"))]
    assert len(letters) == 2 and all(d.dead_at_ms is not None for d in letters)
    replay = await f.replay_dead(DeadFilter(reason="frontier_full"), bounds=QueueBounds())
    assert replay.queued == 2
    assert sorted(u.rsplit("/", 1)[1] for u in await drain(f)) == ["low", "lower"]


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
