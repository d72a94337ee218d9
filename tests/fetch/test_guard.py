"""The private-address guard in the Fetcher: resolver wrapper, IP literals, redirects, robots.

Only loopback servers are contacted. Other ranges come from a stub resolver that answers a
made-up host name with fake addresses: the guard must refuse them before any connection.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer

from crawlq.errors import PrivateAddressError
from crawlq.fetch import AddressRefused, Fetcher, GuardedResolver
from crawlq.robots import RobotsCache
from crawlq.testing import RequestLog, fault_state, make_fault_app
from crawlq.urls import host_key
from crawlq.web.addresses import AddressGuard

UA = "crawlq-test/1.0"


class StubResolver(AbstractResolver):
    """Answers every lookup with fixed addresses (no DNS) and counts the lookups."""

    def __init__(self, *addresses: str, port: int | None = None) -> None:
        self.addresses = addresses
        self.port = port
        self.lookups: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=self.port or port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            )
            for address in self.addresses
        ]

    async def close(self) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback socket that listens but never accepts: a connect to it would queue."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


def assert_never_connected(sock: socket.socket) -> None:
    """The kernel queues a completed TCP handshake even unaccepted: nothing may be there."""
    with pytest.raises(BlockingIOError):
        sock.accept()


@pytest.fixture
async def other_log() -> RequestLog:
    return RequestLog()


@pytest.fixture
async def other(other_log: RequestLog) -> AsyncIterator[str]:
    """A second loopback host, 127.0.0.2."""
    async with TestServer(make_fault_app(other_log), host="127.0.0.2") as server:
        yield str(server.make_url("")).rstrip("/")


# -- the resolver wrapper --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "range_name"),
    [
        ("10.0.0.1", "private 10.0.0.0/8"),
        ("169.254.169.254", "link-local 169.254.0.0/16"),
        ("fd00::1", "unique-local fc00::/7"),
        ("::ffff:127.0.0.1", "loopback 127.0.0.0/8 (IPv4-mapped)"),
    ],
)
async def test_the_resolver_refuses_a_name_that_resolves_to_a_private_address(
    address: str, range_name: str
) -> None:
    stub = StubResolver(address)
    resolver = GuardedResolver(AddressGuard(), stub)
    with pytest.raises(AddressRefused) as caught:
        await resolver.resolve("metadata.crawlq-test.invalid", 80)
    assert (caught.value.host, caught.value.range_name) == (
        "metadata.crawlq-test.invalid",
        range_name,
    )
    assert stub.lookups == ["metadata.crawlq-test.invalid"]


async def test_the_resolver_keeps_only_the_public_addresses_of_a_mixed_answer() -> None:
    # DNS rebinding answers public and private addresses: only the public ones survive, so
    # the connection cannot go to the private one (nothing is connected to in this test)
    stub = StubResolver("10.0.0.1", "93.184.216.34", "fd00::1", "2606:2800:220:1::1")
    kept = await GuardedResolver(AddressGuard(), stub).resolve("mixed.crawlq-test.invalid", 80)
    assert [info["host"] for info in kept] == ["93.184.216.34", "2606:2800:220:1::1"]


async def test_the_resolver_lets_a_seed_host_and_allow_private_through() -> None:
    stub = StubResolver("10.0.0.1")
    seed_guard = AddressGuard.of(hosts=["intranet.crawlq-test.invalid"])
    kept = await GuardedResolver(seed_guard, stub).resolve("INTRANET.crawlq-test.invalid", 80)
    assert [info["host"] for info in kept] == ["10.0.0.1"]
    with pytest.raises(AddressRefused):
        await GuardedResolver(seed_guard, stub).resolve("other.crawlq-test.invalid", 80)
    open_guard = AddressGuard(allow_private=True)
    assert len(await GuardedResolver(open_guard, stub).resolve("x.crawlq-test.invalid")) == 1


# -- through the Fetcher ---------------------------------------------------------------------


async def test_a_name_resolving_to_a_private_address_is_never_connected_to(
    listener: socket.socket,
) -> None:
    port = listener.getsockname()[1]
    stub = StubResolver("127.0.0.1", port=port)
    url = f"http://intranet.crawlq-test.invalid:{port}/admin"
    async with Fetcher(user_agent=UA, resolver=stub, connect_timeout_s=2.0) as fetcher:
        with pytest.raises(PrivateAddressError) as caught:
            await fetcher.fetch(url)
    exc = caught.value
    assert (exc.reason, exc.url, exc.host) == (
        "private_address",
        url,
        "intranet.crawlq-test.invalid",
    )
    assert "loopback 127.0.0.0/8" in str(exc) and "intranet.crawlq-test.invalid" in str(exc)
    assert stub.lookups == ["intranet.crawlq-test.invalid"]
    assert_never_connected(listener)


async def test_the_same_name_is_fetched_when_it_is_a_seed_host(base: str, log: RequestLog) -> None:
    port = int(base.rsplit(":", 1)[1])
    stub = StubResolver("127.0.0.1", port=port)
    guard = AddressGuard.of(hosts=["intranet.crawlq-test.invalid"])
    async with Fetcher(user_agent=UA, resolver=stub, address_guard=guard) as fetcher:
        result = await fetcher.fetch(f"http://intranet.crawlq-test.invalid:{port}/page/1")
    assert result.status == 200
    assert [r.path for r in log.requests()] == ["/page/1"]


@pytest.mark.parametrize("literal", ["127.0.0.1", "[::ffff:127.0.0.1]", "0.0.0.0"])
async def test_an_ip_literal_is_refused_before_any_connection(
    listener: socket.socket, literal: str
) -> None:
    port = listener.getsockname()[1]
    url = f"http://{literal}:{port}/"
    async with Fetcher(user_agent=UA) as fetcher:
        with pytest.raises(PrivateAddressError) as caught:
            await fetcher.fetch(url)
    assert caught.value.host == literal.strip("[]")
    assert_never_connected(listener)


async def test_a_seed_literal_is_fetched_and_allow_private_fetches_any(
    base: str, other: str
) -> None:
    guard = AddressGuard.of(hosts=[host_key(base)])  # "127.0.0.1:PORT": the port is ignored
    async with Fetcher(user_agent=UA, address_guard=guard) as fetcher:
        assert (await fetcher.fetch(f"{base}/page/1")).status == 200
        with pytest.raises(PrivateAddressError):
            await fetcher.fetch(f"{other}/page/1")
    async with Fetcher(user_agent=UA, address_guard=AddressGuard(allow_private=True)) as f:
        assert (await f.fetch(f"{other}/page/1")).status == 200


@pytest.mark.parametrize("target_host", ["127.0.0.2", "localhost"])
async def test_a_redirect_hop_to_a_private_host_is_refused(
    base: str, other: str, other_log: RequestLog, target_host: str
) -> None:
    # "localhost" is a name: refused by the resolver wrapper, not the literal check
    target = other.replace("127.0.0.2", target_host) + "/page/1"
    url = f"{base}/redirect-to?url={target}"
    guard = AddressGuard.of(hosts=["127.0.0.1"])
    async with Fetcher(user_agent=UA, address_guard=guard) as fetcher:
        with pytest.raises(PrivateAddressError) as caught:
            await fetcher.fetch(url)
    assert caught.value.url == url
    assert caught.value.host == target_host
    assert other_log.requests() == []


async def test_robots_txt_of_a_refused_host_is_not_fetched_and_the_page_is_refused(
    base: str, log: RequestLog
) -> None:
    async with Fetcher(user_agent=UA) as fetcher:
        robots = RobotsCache(fetcher, UA)
        with pytest.raises(PrivateAddressError):
            await robots.allowed(f"{base}/page/1")
        assert not robots.is_fresh(f"{base}/page/1")  # nothing cached: nothing was fetched
    assert log.requests() == []


async def test_robots_txt_redirecting_to_a_refused_host_is_unavailable(
    app: web.Application,
    base: str,
    other: str,
    other_log: RequestLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = fault_state(app)
    state.robots_status = 302
    state.robots_headers = {"Location": f"{other}/robots-body"}
    guard = AddressGuard.of(hosts=["127.0.0.1"])
    async with Fetcher(user_agent=UA, address_guard=guard) as fetcher:
        robots = RobotsCache(fetcher, UA)
        # RFC 9309 §2.3.1.2: a redirect that cannot be followed leaves robots.txt unavailable
        with caplog.at_level(logging.WARNING, logger="crawlq"):
            assert await robots.allowed(f"{base}/private/x")
    assert other_log.requests() == []
    # ...and says so (the operator sees why everything is allowed), naming the refused host
    refused = urlsplit(other).hostname
    warned = [r.getMessage() for r in caplog.records if "robots.txt unavailable" in r.getMessage()]
    assert len(warned) == 1 and f"refused private address ({refused})" in warned[0], warned
