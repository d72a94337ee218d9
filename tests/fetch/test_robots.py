"""RobotsCache against the real loopback fault server: RFC 9309 status, size and cache rules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawlq.addresses import AddressGuard
from crawlq.errors import PermanentFetchError, TransientFetchError
from crawlq.fetch import Fetcher
from crawlq.robots import RobotsCache
from crawlq.testing import FaultState, RequestLog, fault_state, make_fault_app
from crawlq.urls import host_key

UA = "crawlq-test/1.0 (+https://example.invalid/bot)"


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def log() -> RequestLog:
    return RequestLog()


@pytest.fixture
def app(log: RequestLog) -> web.Application:
    return make_fault_app(log)


@pytest.fixture
def state(app: web.Application) -> FaultState:
    return fault_state(app)


@pytest.fixture
async def base(app: web.Application) -> AsyncIterator[str]:
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url("")).rstrip("/")


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        user_agent=UA, timeout_s=2.0, address_guard=AddressGuard(allow_private=True)
    ) as f:
        yield f


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def robots(fetcher: Fetcher, clock: FakeClock) -> RobotsCache:
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
    clock: FakeClock,
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
    clock.now_s += 6
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
    robots: RobotsCache, base: str, state: FaultState, log: RequestLog, clock: FakeClock
) -> None:
    assert not await robots.allowed(f"{base}/private/x")
    state.robots_txt = "User-agent: *\nDisallow:\n"
    clock.now_s += 3599
    assert not await robots.allowed(f"{base}/private/x")
    assert log.count("/robots.txt") == 1
    clock.now_s += 2
    assert await robots.allowed(f"{base}/private/x")
    assert log.count("/robots.txt") == 2


async def test_stale_copy_used_while_unreachable(
    robots: RobotsCache, base: str, state: FaultState, log: RequestLog, clock: FakeClock
) -> None:
    assert not await robots.allowed(f"{base}/private/x")
    clock.now_s += 4000
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
