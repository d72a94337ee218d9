"""Cookies in `Fetcher` against real loopback servers: the jar, a fetch's own cookies, and the
cookies a redirect hands to its target. The servers' request logs record the Cookie header."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestServer
from yarl import URL

from crawlq.fetch import MAX_JAR_COOKIES, MAX_SET_COOKIE_CHARS, CookieJar, Fetcher
from crawlq.testing import RequestLog, make_fault_app
from crawlq.web.addresses import AddressGuard

UA = "crawlq-test/1.0"
OPEN = AddressGuard(allow_private=True)


def make_fetcher(*, cookies: bool = True) -> Fetcher:
    return Fetcher(
        address_guard=OPEN, user_agent=UA, timeout_s=5.0, connect_timeout_s=2.0, cookies=cookies
    )


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with make_fetcher() as f:
        yield f


@pytest.fixture
def log2() -> RequestLog:
    return RequestLog()


@pytest.fixture
async def base2(log2: RequestLog) -> AsyncIterator[str]:
    """The fault app on another loopback host, 127.0.0.2."""
    async with TestServer(make_fault_app(log2), host="127.0.0.2") as server:
        yield str(server.make_url("")).rstrip("/")


def redirect_to(base: str, target: str, *set_cookies: str) -> str:
    query = "".join(f"&set_cookie={quote(c)}" for c in set_cookies)
    return f"{base}/redirect-to?url={quote(target, safe='')}{query}"


async def test_the_jar_sends_a_session_cookie_back_to_its_host_only(
    fetcher: Fetcher, base: str, base2: str, log: RequestLog, log2: RequestLog
) -> None:
    await fetcher.fetch(f"{base}/status/200")
    await fetcher.fetch(f"{base}/set-cookie/sid/abc")
    await fetcher.fetch(f"{base}/status/201")
    await fetcher.fetch(f"{base2}/status/202")
    assert log.cookies("/status/200") == [None]  # before it was set
    assert log.cookies("/status/201") == ["sid=abc"]
    assert log2.cookies("/status/202") == [None]  # 127.0.0.2 is another host


async def test_without_cookies_nothing_is_kept_or_sent(base: str, log: RequestLog) -> None:
    async with make_fetcher(cookies=False) as fetcher:
        await fetcher.fetch(f"{base}/set-cookie/sid/abc")
        await fetcher.fetch(f"{base}/status/200", cookies={"token": "t1"})
        wall = await fetcher.fetch(f"{base}/cookie-wall/k", follow_redirects=False)
    assert log.cookies("/status/200") == [None]
    assert wall.location_cookies == {}


async def test_a_fetch_sends_its_own_cookies_over_the_jar_and_does_not_keep_them(
    fetcher: Fetcher, base: str, log: RequestLog
) -> None:
    await fetcher.fetch(f"{base}/set-cookie/sid/from-server")
    await fetcher.fetch(f"{base}/status/200", cookies={"token": "t1", "sid": "mine"})
    await fetcher.fetch(f"{base}/status/201")
    sent = log.cookies("/status/200")[0]
    assert sent is not None and sorted(sent.split("; ")) == ["sid=mine", "token=t1"]
    assert log.cookies("/status/201") == ["sid=from-server"]


async def test_values_are_sent_as_given_not_quoted(
    fetcher: Fetcher, base: str, log: RequestLog
) -> None:
    await fetcher.fetch(f"{base}/status/200", cookies={"b64": "YQ==/+", "q": '"x"'})
    assert log.cookies("/status/200") == ['b64=YQ==/+; q="x"']


async def test_a_cookie_wall_redirect_hands_its_cookie_to_the_target(
    fetcher: Fetcher, base: str, log: RequestLog
) -> None:
    url = f"{base}/cookie-wall/k"
    wall = await fetcher.fetch(url, follow_redirects=False)
    assert (wall.status, wall.location) == (302, url)
    assert wall.location_cookies == {"wall_k": "passed"}
    # another worker, whose jar never saw the cookie, gets past the wall with it
    async with make_fetcher() as other:
        behind = await other.fetch(url, cookies=wall.location_cookies)
    assert behind.status == 200
    assert log.cookies("/cookie-wall/k") == [None, "wall_k=passed"]


async def test_redirect_cookies_follow_rfc_6265_to_the_target(
    fetcher: Fetcher, base: str, base2: str
) -> None:
    same = f"{base}/a/page"
    # the request's own cookies and a new one go on to the same host
    r = await fetcher.fetch(
        redirect_to(base, same, "new=1; Path=/"), cookies={"own": "o"}, follow_redirects=False
    )
    assert r.location_cookies == {"own": "o", "new": "1"}
    # a new value replaces, Max-Age=0 deletes, a path that does not match stays behind
    r = await fetcher.fetch(
        redirect_to(base, same, "own=2; Path=/", "gone=; Max-Age=0; Path=/", "p=1; Path=/b"),
        cookies={"gone": "g", "own": "o"},
        follow_redirects=False,
    )
    assert r.location_cookies == {"own": "2"}
    # another host gets neither the request's cookies nor the host-only ones set here
    r = await fetcher.fetch(
        redirect_to(base, f"{base2}/x", "new=1; Path=/"),
        cookies={"own": "o"},
        follow_redirects=False,
    )
    assert r.location_cookies == {}
    # a Secure cookie is not handed to an http target; a value crawlq cannot carry is dropped
    r = await fetcher.fetch(
        redirect_to(base, same, "s=1; Path=/; Secure", "odd=a b; Path=/"), follow_redirects=False
    )
    assert r.location_cookies == {}


async def test_a_followed_redirect_carries_the_cookies_it_set(base: str, log: RequestLog) -> None:
    async with make_fetcher() as fetcher:
        result = await fetcher.fetch(f"{base}/cookie-wall/f")
    assert (result.status, result.redirects) == (200, (f"{base}/cookie-wall/f",))
    assert log.cookies("/cookie-wall/f") == [None, "wall_f=passed"]


async def test_the_jar_keeps_cookies_of_ip_hosts_for_that_address_only() -> None:
    jar = CookieJar()
    jar.update_cookies({"sid": "1"}, URL("http://127.0.0.1:8000/"))
    assert set(jar.filter_cookies(URL("http://127.0.0.1:9000/x"))) == {"sid"}
    assert len(jar.filter_cookies(URL("http://127.0.0.2:8000/"))) == 0
    jar.update_cookies_from_headers(["evil=1; Domain=0.0.1"], URL("http://127.0.0.1/"))
    assert [m.key for m in jar] == ["sid"]  # no domain cookie for a part of an address


async def test_the_jar_bounds_its_memory() -> None:
    jar = CookieJar()
    big = "x=" + "v" * MAX_SET_COOKIE_CHARS
    jar.update_cookies_from_headers([big, "small=1"], URL("http://a.test/"))
    assert [m.key for m in jar] == ["small"]
    jar.update_cookies({"y": "v" * MAX_SET_COOKIE_CHARS}, URL("http://a.test/"))
    assert [m.key for m in jar] == ["small"]
    jar.clear()
    for n in range(MAX_JAR_COOKIES // 10):
        headers = [f"c{i}=1" for i in range(10)]
        jar.update_cookies_from_headers(headers, URL(f"http://h{n}.test/"))
    assert len(jar) == MAX_JAR_COOKIES
    jar.update_cookies_from_headers(["one=more"], URL("http://last.test/"))
    assert len(jar) == 0  # over the cap: it started over


async def test_the_request_recorded_for_warc_holds_the_cookie_header_as_sent(
    base: str,
) -> None:
    async with Fetcher(
        address_guard=OPEN, user_agent=UA, record_exchanges=True, timeout_s=5.0
    ) as fetcher:
        await fetcher.fetch(f"{base}/set-cookie/sid/abc")
        result = await fetcher.fetch(f"{base}/status/200", cookies={"token": "t1"})
    assert result.exchange is not None
    sent = [v for name, v in result.exchange.request_headers if name.lower() == "cookie"]
    assert len(sent) == 1 and sorted(sent[0].split("; ")) == ["sid=abc", "token=t1"]
