"""The host rules contract (`crawlq.frontier.hosts.HostRules`), checked on every backend."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
import redis.asyncio as aioredis

from crawlq.clock import ManualClock
from crawlq.frontier import HostPolicy
from crawlq.frontier.redis import RedisFrontier
from crawlq.frontier.sqlite import SqliteFrontier
from crawlq.rules.politeness import Politeness, Strike, StrikePlan
from crawlq.rules.proxies import BenchPlan, ProxyState, parse_proxy

from .conftest import VT, MakeFrontier, reqs


async def test_host_policy_override(make_frontier: MakeFrontier) -> None:
    clock = ManualClock()
    f = await make_frontier(policy=HostPolicy(0.0, 10), clock=clock)
    await f.set_host_policy("a.test", HostPolicy(5.0, 1))
    await f.push(reqs("1", "2"))
    assert len(await f.lease(10, "w", VT)) == 1
    clock.advance(4.0)
    assert await f.lease(10, "w", VT) == []


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
