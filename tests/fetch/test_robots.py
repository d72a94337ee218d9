"""RobotsCache against the real loopback fault server: RFC 9309 status, size and cache rules."""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from protego import Protego

from crawlq.clock import ManualClock
from crawlq.errors import PermanentFetchError, TransientFetchError
from crawlq.fetch import Fetcher
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.frontier.robots import RobotsRecord
from crawlq.robots import RobotsCache
from crawlq.robots.file import robots_text as _robots_text
from crawlq.testing import FaultState, RequestLog
from crawlq.urls import host_key
from crawlq.web.addresses import AddressGuard

UA = "crawlq-test/1.0 (+https://example.invalid/bot)"


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        user_agent=UA, timeout_s=2.0, address_guard=AddressGuard(allow_private=True)
    ) as f:
        yield f


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def robots(fetcher: Fetcher, clock: ManualClock) -> RobotsCache:
    return RobotsCache(fetcher, UA, ttl_s=3600, failure_ttl_s=5, clock=clock)


async def test_allow_and_disallow(robots: RobotsCache, base: str, state: FaultState) -> None:
    state.robots_txt = "User-agent: *\nDisallow: /private/\nAllow: /private/ok\n"
    assert await robots.allowed(f"{base}/page/1")
    assert not await robots.allowed(f"{base}/private/secret")
    assert await robots.allowed(f"{base}/private/ok")
    assert await robots.allowed(f"{base}/robots.txt")


async def test_product_token_selects_group(fetcher: Fetcher, base: str, state: FaultState) -> None:
    state.robots_txt = "User-agent: crawlq-test\nDisallow: /\n\nUser-agent: *\nDisallow:\n"
    ours = RobotsCache(fetcher, UA)
    assert ours.product_token == "crawlq-test"
    assert not await ours.allowed(f"{base}/page/1")
    other = RobotsCache(fetcher, "otherbot/2.0")
    assert await other.allowed(f"{base}/page/1")


@pytest.mark.parametrize("status", [404, 403, 401, 410])
async def test_4xx_allows_everything(
    robots: RobotsCache, base: str, state: FaultState, status: int
) -> None:
    state.robots_status = status
    state.robots_txt = "User-agent: *\nDisallow: /\n"  # ignored: the status says unavailable
    assert await robots.allowed(f"{base}/private/x")


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_unreachable_raises_transient(
    robots: RobotsCache,
    base: str,
    state: FaultState,
    log: RequestLog,
    clock: ManualClock,
    status: int,
) -> None:
    state.robots_status = status
    for _ in range(3):
        with pytest.raises(TransientFetchError) as info:
            await robots.allowed(f"{base}/page/1")
        assert info.value.reason == "robots_unreachable"
        assert info.value.url == f"{base}/page/1"
    assert log.count("/robots.txt") == 1  # the failure is cached for failure_ttl_s
    state.robots_status = 200
    clock.advance(6)
    assert await robots.allowed(f"{base}/page/1")
    assert not await robots.allowed(f"{base}/private/x")
    assert log.count("/robots.txt") == 2


async def test_unreachable_server(fetcher: Fetcher) -> None:
    robots = RobotsCache(fetcher, UA)
    with pytest.raises(TransientFetchError) as info:
        await robots.allowed("http://127.0.0.1:1/page")
    assert info.value.reason == "robots_unreachable"


async def test_single_flight(robots: RobotsCache, base: str, log: RequestLog) -> None:
    urls = [f"{base}/page/{n}" for n in range(10)] + [f"{base}/private/{n}" for n in range(10)]
    answers = await asyncio.gather(*(robots.allowed(url) for url in urls))
    assert answers == [True] * 10 + [False] * 10
    assert log.count("/robots.txt") == 1


async def test_single_flight_shares_failures(
    robots: RobotsCache, base: str, state: FaultState, log: RequestLog
) -> None:
    state.robots_status = 503
    results = await asyncio.gather(
        *(robots.allowed(f"{base}/page/{n}") for n in range(20)), return_exceptions=True
    )
    assert all(isinstance(r, TransientFetchError) for r in results)
    assert log.count("/robots.txt") == 1


async def test_cancelled_caller_does_not_cancel_the_shared_fetch(
    robots: RobotsCache, base: str, state: FaultState, log: RequestLog
) -> None:
    state.robots_status = 302
    state.robots_headers = {"Location": "/delay/0.3"}  # a slow robots.txt (an HTML page)
    first = asyncio.create_task(robots.allowed(f"{base}/page/1"))
    second = asyncio.create_task(robots.allowed(f"{base}/page/2"))
    await asyncio.sleep(0.05)
    first.cancel()
    assert await second
    assert first.cancelled()
    assert log.count("/robots.txt") == 1


async def test_cached_for_ttl(
    robots: RobotsCache, base: str, state: FaultState, log: RequestLog, clock: ManualClock
) -> None:
    assert not await robots.allowed(f"{base}/private/x")
    state.robots_txt = "User-agent: *\nDisallow:\n"
    clock.advance(3599)
    assert not await robots.allowed(f"{base}/private/x")
    assert log.count("/robots.txt") == 1
    clock.advance(2)
    assert await robots.allowed(f"{base}/private/x")
    assert log.count("/robots.txt") == 2


async def test_stale_copy_used_while_unreachable(
    robots: RobotsCache, base: str, state: FaultState, log: RequestLog, clock: ManualClock
) -> None:
    assert not await robots.allowed(f"{base}/private/x")
    clock.advance(4000)
    state.robots_status = 503
    assert not await robots.allowed(f"{base}/private/x")  # RFC 9309 §2.4
    assert await robots.allowed(f"{base}/page/1")
    assert log.count("/robots.txt") == 2


async def test_origins_are_cached_separately(
    robots: RobotsCache, base: str, log: RequestLog
) -> None:
    other = base.replace("127.0.0.1", "localhost")
    assert await robots.allowed(f"{base}/page/1")
    assert await robots.allowed(f"{other}/page/1")
    assert await robots.allowed(f"{base}/page/2")
    assert log.count("/robots.txt") == 2


@pytest.mark.parametrize(("hops", "allowed"), [(5, False), (6, True)])
async def test_redirects_followed_up_to_five(
    robots: RobotsCache, base: str, state: FaultState, hops: int, allowed: bool
) -> None:
    state.robots_status = 301
    # robots.txt -> /redirect/{n} -> ... -> /redirect/1 -> /robots-body: n + 1 redirects
    state.robots_headers = {"Location": f"/redirect/{hops - 1}?to=/robots-body"}
    # five hops reach the rules; a sixth means "unavailable" (RFC 9309 §2.3.1.2)
    assert await robots.allowed(f"{base}/private/x") is allowed


async def test_only_first_500_kib_parsed(robots: RobotsCache, base: str, state: FaultState) -> None:
    padding = "# " + "x" * 97 + "\n"
    state.robots_txt = (
        "User-agent: *\nDisallow: /early/\n"
        + padding * (600 * 1024 // len(padding))
        + "Disallow: /late/\n"
    )
    assert not await robots.allowed(f"{base}/early/1")
    assert await robots.allowed(f"{base}/late/1")


async def test_crawl_delay(robots: RobotsCache, base: str, state: FaultState) -> None:
    state.robots_txt = "User-agent: *\nCrawl-delay: 2.5\nDisallow: /private/\n"
    key = host_key(base + "/")
    assert robots.crawl_delay_s(key) is None  # not fetched yet
    assert await robots.allowed(f"{base}/page/1")
    assert robots.crawl_delay_s(key) == 2.5
    assert robots.crawl_delay_s("elsewhere.example") is None


async def test_invalid_url(robots: RobotsCache) -> None:
    with pytest.raises(PermanentFetchError) as info:
        await robots.allowed("mailto:someone@example.com")
    assert info.value.reason == "invalid_url"


async def test_rejects_ttl_over_24_hours(fetcher: Fetcher) -> None:
    with pytest.raises(ValueError):
        RobotsCache(fetcher, UA, ttl_s=86401)
    with pytest.raises(ValueError):
        RobotsCache(fetcher, "/1.0")


# -- encodings (RFC 9309 §2.3: UTF-8) -------------------------------------------------------


async def test_utf8_bom_does_not_hide_the_first_group(
    robots: RobotsCache, base: str, state: FaultState
) -> None:
    state.robots_txt = "\ufeffUser-agent: *\nDisallow: /private/\n"
    assert not await robots.allowed(f"{base}/private/x")
    assert await robots.allowed(f"{base}/page/1")


@pytest.mark.parametrize(
    "body",
    [
        codecs.BOM_UTF8 + b"User-agent: *\r\nDisallow: /private/\r\n",
        codecs.BOM_UTF16_LE + "User-agent: *\nDisallow: /private/\n".encode("utf-16-le"),
        codecs.BOM_UTF16_BE + "User-agent: *\nDisallow: /private/\n".encode("utf-16-be"),
        b"# caf\xe9 (latin-1, not UTF-8)\nUser-agent: *\nDisallow: /private/\n",
    ],
    ids=["utf8-bom", "utf16le-bom", "utf16be-bom", "latin1"],
)
def test_robots_text_decodes_boms_and_falls_back_to_latin1(body: bytes) -> None:
    text = _robots_text(body)
    assert not text.startswith("\ufeff")
    rules = Protego.parse(text)
    assert not rules.can_fetch("http://a.test/private/x", "crawlq")
    assert rules.can_fetch("http://a.test/page", "crawlq")


def test_robots_text_keeps_non_ascii_utf8_paths() -> None:
    text = _robots_text("User-agent: *\nDisallow: /café/\n".encode())
    assert "/café/" in text


# -- the job's shared copy (the frontier's robots_* methods) --------------------------------


@pytest.fixture
async def shared(redis_url: str, job: str, clock: ManualClock) -> AsyncIterator[RedisFrontier]:
    f = await RedisFrontier.open(redis_url, job, clock=clock, create=True)
    yield f
    await f.close()


def worker_cache(fetcher: Fetcher, shared: RedisFrontier, clock: ManualClock) -> RobotsCache:
    """One worker's cache: its own LRU, the job's shared records."""
    return RobotsCache(fetcher, UA, ttl_s=3600, failure_ttl_s=5, clock=clock, shared=shared)


async def test_workers_share_one_fetch(
    fetcher: Fetcher, shared: RedisFrontier, clock: ManualClock, base: str, log: RequestLog
) -> None:
    caches = [worker_cache(fetcher, shared, clock) for _ in range(5)]
    urls = [f"{base}/page/{n}" for n in range(4)] + [f"{base}/private/{n}" for n in range(4)]
    verdicts = await asyncio.gather(*(c.check(u) for c in caches for u in urls))
    assert [v.allowed for v in verdicts] == ([True] * 4 + [False] * 4) * 5
    assert log.count("/robots.txt") == 1
    assert sum(v.fetched for v in verdicts) == 1  # only that caller's slot went to it
    trips = shared.round_trips
    assert await caches[0].allowed(f"{base}/page/9")  # from the local LRU: no backend call
    assert shared.round_trips == trips


async def test_crawl_delay_from_the_shared_copy(
    fetcher: Fetcher, shared: RedisFrontier, clock: ManualClock, base: str, state: FaultState
) -> None:
    state.robots_txt = "User-agent: *\nCrawl-delay: 2.5\n"
    first, second = (worker_cache(fetcher, shared, clock) for _ in range(2))
    assert (await first.check(f"{base}/a")).crawl_delay_s == 2.5
    verdict = await second.check(f"{base}/b")
    assert (verdict.fetched, verdict.crawl_delay_s) == (False, 2.5)
    assert second.crawl_delay_s(host_key(base + "/")) == 2.5


async def test_shared_copy_is_refreshed_after_the_ttl(
    fetcher: Fetcher,
    shared: RedisFrontier,
    clock: ManualClock,
    base: str,
    log: RequestLog,
    state: FaultState,
) -> None:
    first, second = (worker_cache(fetcher, shared, clock) for _ in range(2))
    assert not await first.allowed(f"{base}/private/x")
    state.robots_txt = "User-agent: *\nDisallow:\n"
    clock.advance(3599)
    assert not await second.allowed(f"{base}/private/x")  # read, not fetched
    assert log.count("/robots.txt") == 1
    clock.advance(2)
    assert (await second.check(f"{base}/private/x")).fetched
    assert await first.allowed(f"{base}/private/x")  # the refreshed shared copy
    assert log.count("/robots.txt") == 2


async def test_shared_failure_keeps_the_earlier_copy(
    fetcher: Fetcher,
    shared: RedisFrontier,
    clock: ManualClock,
    base: str,
    log: RequestLog,
    state: FaultState,
) -> None:
    first, second = (worker_cache(fetcher, shared, clock) for _ in range(2))
    assert not await first.allowed(f"{base}/private/x")
    clock.advance(4000)
    state.robots_status = 503
    assert not await second.allowed(f"{base}/private/x")  # RFC 9309 §2.4
    assert not await first.allowed(f"{base}/private/x")
    assert log.count("/robots.txt") == 2
    clock.advance(6)  # the failure is remembered for failure_ttl_s only
    state.robots_status = 200
    state.robots_txt = "User-agent: *\nDisallow:\n"
    assert await first.allowed(f"{base}/private/x")
    assert log.count("/robots.txt") == 3


async def test_shared_unreachable_is_shared_for_the_failure_ttl(
    fetcher: Fetcher,
    shared: RedisFrontier,
    clock: ManualClock,
    base: str,
    log: RequestLog,
    state: FaultState,
) -> None:
    state.robots_status = 503
    for cache in (worker_cache(fetcher, shared, clock) for _ in range(3)):
        with pytest.raises(TransientFetchError, match="robots_unreachable"):
            await cache.allowed(f"{base}/page/1")
    assert log.count("/robots.txt") == 1


async def test_corrupt_shared_record_is_refetched(
    fetcher: Fetcher,
    shared: RedisFrontier,
    clock: ManualClock,
    base: str,
    log: RequestLog,
    redis_url: str,
    job: str,
) -> None:
    origin = base.lower()
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.hset(Keyspace(job).robots, origin, b"\x00garbage")
    finally:
        await client.aclose()
    cache = worker_cache(fetcher, shared, clock)
    assert not await cache.allowed(f"{base}/private/x")
    assert log.count("/robots.txt") == 1
    record = await shared.robots_get(origin)
    assert record is not None and record.status == "parsed"


async def test_record_valid_beyond_24_hours_is_not_trusted(
    fetcher: Fetcher, shared: RedisFrontier, clock: ManualClock, base: str, log: RequestLog
) -> None:
    now = clock.wall_ms()
    forever = RobotsRecord("parsed", now, now + 10 * 86_400_000, body="User-agent: *\n")
    await shared.robots_put(base.lower(), forever)
    assert not await worker_cache(fetcher, shared, clock).allowed(f"{base}/private/x")
    assert log.count("/robots.txt") == 1


async def test_waiting_for_a_dead_claimer_gives_up_then_claims(
    fetcher: Fetcher, shared: RedisFrontier, clock: ManualClock, base: str, log: RequestLog
) -> None:
    origin = base.lower()
    assert await shared.robots_claim(origin, "killed-worker", 30.0)
    # this worker waits 1.5 * its own claim_ttl_s for another's fetch, then gives up
    cache = RobotsCache(fetcher, UA, clock=clock, shared=shared, claim_ttl_s=0.05, poll_s=0.01)
    with pytest.raises(TransientFetchError, match="robots_unreachable"):
        await cache.allowed(f"{base}/page/1")
    assert log.count("/robots.txt") == 0
    clock.advance(31)  # the dead worker's claim lapses
    assert (await cache.check(f"{base}/page/1")).fetched
    assert log.count("/robots.txt") == 1
