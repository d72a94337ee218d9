"""The inspection contract (`crawlq.frontier.inspection.Inspection`), on every backend."""

from __future__ import annotations

from crawlq.clock import ManualClock
from crawlq.frontier import HostPolicy
from crawlq.frontier.inspection import DeadFilter, DeadLetter
from crawlq.frontier.queue import QueueBounds
from crawlq.request import CrawlRequest, Lease

from .conftest import VT, MakeFrontier, drain, reqs


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


async def test_a_replay_under_a_block_bound_requeues_only_what_fits(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(policy=HostPolicy(0.0, 100), bounds=QueueBounds(max_queued=3))
    await f.push(reqs("d1", "d2", "d3", "d4"))
    for lease in await f.lease(4, "w", VT):
        await f.dead(lease, "http_503")
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
    f = await make_frontier(policy=HostPolicy(0.0, 100), bounds=QueueBounds(max_queued_per_host=2))
    await f.push(reqs("d1", "d2", "d3") + reqs("d1", host="b.test"))
    for lease in await f.lease(4, "w", VT):
        await f.dead(lease, "connect_error")
    done = await f.replay_dead()
    assert (done.queued, done.refused) == (3, 1)
    hosts = {h.host: h.queued for h in (await f.stats()).hosts}
    assert hosts == {"a.test": 2, "b.test": 1}


async def test_a_replay_under_drop_lowest_dead_letters_the_lowest(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(
        policy=HostPolicy(0.0, 100), bounds=QueueBounds(max_queued=2, when_full="drop-lowest")
    )
    await f.push(reqs("high", priority=9) + reqs("low", priority=-5))
    for lease in await f.lease(2, "w", VT):
        await f.dead(lease, "http_503")
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
