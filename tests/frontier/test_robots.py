"""The shared robots.txt contract (`crawlq.frontier.robots.SharedRobots`), on every backend."""

from __future__ import annotations

import asyncio

from crawlq.clock import ManualClock

from .conftest import MakeFrontier


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
