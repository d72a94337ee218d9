"""Fetching through proxies: the proxy's own log is the evidence (`crawlq.testing.proxy`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from aiohttp import web

from crawlq.errors import PermanentFetchError, PrivateAddressError, ProxiesBenched, ProxyFailed
from crawlq.fetch import Fetcher
from crawlq.rules.proxies import BenchPlan, ProxyPool, ProxyState, parse_proxy
from crawlq.testing import RequestLog, ServerThread
from crawlq.testing.proxy import HttpProxy, Socks5Proxy
from crawlq.web.addresses import AddressGuard

SECRET = "s3cr3t-proxy-pw"


def _app(log: RequestLog) -> web.Application:
    async def page(_request: web.Request) -> web.Response:
        return web.Response(text="<html><title>hi</title></html>", content_type="text/html")

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/page", page)
    return app


@pytest.fixture
def origin() -> Iterator[tuple[str, RequestLog]]:
    log = RequestLog()
    with ServerThread(_app(log)) as site:
        yield site.base_url, log


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fetcher(*urls: str, guard: AddressGuard | None = None, **kw: object) -> Fetcher:
    pool = ProxyPool([parse_proxy(u) for u in urls], **kw)  # type: ignore[arg-type]
    return Fetcher(
        user_agent="t",
        address_guard=guard or AddressGuard(allow_private=True),
        proxies=pool,
        record_exchanges=True,
    )


async def test_a_fetch_goes_through_the_http_proxy_with_its_credentials(origin) -> None:
    base, log = origin
    with HttpProxy(user="bob", password=SECRET) as proxy:
        async with _fetcher(f"http://bob:{SECRET}@{proxy.address}") as fetcher:
            result = await fetcher.fetch(f"{base}/page")
    assert result.status == 200 and "hi" in result.text
    assert proxy.log == [f"GET {base}/page"]
    assert proxy.auth[0] is not None and proxy.auth[0].startswith("Basic ")
    assert log.count("/page") == 1  # the origin saw it, and only through the proxy
    assert result.exchange is not None
    assert SECRET not in repr(result.exchange.request_headers)


async def test_a_fetch_goes_through_a_socks5_proxy_with_user_and_password(origin) -> None:
    base, log = origin
    with Socks5Proxy(user="bob", password=SECRET) as proxy:
        async with _fetcher(f"socks5://bob:{SECRET}@{proxy.address}") as fetcher:
            result = await fetcher.fetch(f"{base}/page")
    assert result.status == 200
    assert proxy.log == [f"SOCKS {base.removeprefix('http://')}"]
    assert proxy.auth == [f"bob:{SECRET}"]
    assert log.count("/page") == 1


async def test_a_socks5_proxy_without_auth(origin) -> None:
    base, _log = origin
    with Socks5Proxy() as proxy:
        async with _fetcher(f"socks5://{proxy.address}") as fetcher:
            assert (await fetcher.fetch(f"{base}/page")).status == 200
    assert proxy.log and proxy.auth == [None]


async def test_a_refusing_proxy_is_the_proxys_failure_and_names_no_credential(origin) -> None:
    base, log = origin
    async with _fetcher(f"http://bob:{SECRET}@127.0.0.1:{_closed_port()}") as fetcher:
        with pytest.raises(ProxyFailed) as caught:
            await fetcher.fetch(f"{base}/page")
    assert caught.value.reason == "proxy_connect_error"
    assert SECRET not in str(caught.value) and log.count() == 0


async def test_407_and_a_proxy_status_5xx_are_the_proxys_failures(origin) -> None:
    base, _log = origin
    with HttpProxy(user="bob", password="other") as strict, HttpProxy(fail=True) as failing:
        async with _fetcher(f"http://bob:{SECRET}@{strict.address}") as fetcher:
            with pytest.raises(ProxyFailed) as caught:
                await fetcher.fetch(f"{base}/page")
        assert caught.value.reason == "proxy_auth_required"
        async with _fetcher(f"http://{failing.address}") as fetcher:
            with pytest.raises(ProxyFailed) as caught:
                await fetcher.fetch(f"{base}/page")
        assert caught.value.reason == "proxy_error"
    assert SECRET not in str(caught.value)


async def test_socks5_wrong_password_is_the_proxys_failure(origin) -> None:
    base, log = origin
    with Socks5Proxy(user="bob", password="right") as proxy:
        async with _fetcher(f"socks5://bob:wrong@{proxy.address}") as fetcher:
            with pytest.raises(ProxyFailed):
                await fetcher.fetch(f"{base}/page")
    assert proxy.log == ["SOCKS auth refused"] and log.count() == 0


async def test_the_guard_judges_the_target_not_the_loopback_proxy(origin) -> None:
    base, log = origin
    with HttpProxy() as proxy:
        async with _fetcher(f"http://{proxy.address}", guard=AddressGuard()) as fetcher:
            with pytest.raises(PrivateAddressError):
                await fetcher.fetch(f"{base}/page")  # 127.0.0.1 target: refused
            with pytest.raises(PrivateAddressError):
                await fetcher.fetch("http://localhost:9/x")  # a name resolved here first
    assert proxy.log == [] and log.count() == 0


async def test_meta_proxy_must_be_one_of_the_process_proxies(origin) -> None:
    base, _log = origin
    with HttpProxy() as proxy:
        async with _fetcher(f"http://bob:{SECRET}@{proxy.address}") as fetcher:
            named = fetcher.route(f"{base}/page", {"proxy": f"http://evil:pw@{proxy.address}"})
            assert named is not None and named.password == SECRET  # ours, not the meta's
            assert fetcher.route(f"{base}/page", {"proxy": None}) is None
            with pytest.raises(PermanentFetchError) as caught:
                fetcher.route(f"{base}/page", {"proxy": "http://10.0.0.1:3128"})
    assert caught.value.reason == "proxy_not_configured"


async def test_benched_proxies_are_skipped_and_all_benched_sends_nothing(origin) -> None:
    base, _log = origin
    with HttpProxy() as one, HttpProxy() as two:
        fetcher = _fetcher(f"http://{one.address}", f"http://{two.address}", rotation="request")
        first = parse_proxy(f"http://{one.address}")
        fetcher.proxies.states[first.id] = ProxyState(0, 1, 2**62)
        async with fetcher:
            for _ in range(3):
                await fetcher.fetch(f"{base}/page")
            for proxy in fetcher.proxies.all():
                fetcher.proxies.states[proxy.id] = ProxyState(0, 1, 2**62)
            with pytest.raises(ProxiesBenched):
                await fetcher.fetch(f"{base}/page")
    assert one.log == [] and len(two.log) == 3


def test_host_rotation_is_stable_and_ids_hold_no_credentials() -> None:
    a, b = parse_proxy(f"http://u:{SECRET}@127.0.0.1:1"), parse_proxy("socks5://127.0.0.1:2")
    pool = ProxyPool([a, b])
    picks = {pool.choose(f"http://h{i}.test/", f"h{i}.test", 0) for i in range(20)}
    assert picks == {a, b}
    assert pool.choose("http://h1.test/x", "h1.test", 0) == pool.choose(
        "http://h1.test/", "h1.test", 0
    )
    assert SECRET not in a.id + str(a) + repr(a)
    assert BenchPlan.of(1).length_ms(1) == 1000 and BenchPlan.of(1).length_ms(3) == 4000


def test_trust_env_reads_proxy_variables_and_no_proxy() -> None:
    env = {"HTTP_PROXY": "http://127.0.0.1:3128", "NO_PROXY": "skip.test"}
    pool = ProxyPool(environ=env)
    assert str(pool.choose("http://a.test/", "a.test", 0)) == "http://127.0.0.1:3128"
    assert pool.choose("http://www.skip.test/", "www.skip.test", 0) is None
    assert not ProxyPool(environ=None).active
