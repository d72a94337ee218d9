"""Fetcher against the real loopback fault server (crawlq.testing): no HTTP mocks."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from crawlq.errors import (
    BodyTooLarge,
    PermanentFetchError,
    RetryableStatus,
    TooManyRedirects,
    TransientFetchError,
)
from crawlq.fetch import Fetcher
from crawlq.fetch.exchange import classify as _classify
from crawlq.testing import CHARSET_SAMPLES, RequestLog, make_fault_app
from crawlq.web.addresses import AddressGuard

UA = "crawlq-test/1.0"
OPEN = AddressGuard(allow_private=True)
"""The guard off: these tests fetch from loopback servers (the guard's own tests: test_guard)."""


@pytest.fixture
def log() -> RequestLog:
    return RequestLog()


@pytest.fixture
async def base(log: RequestLog) -> AsyncIterator[str]:
    async with TestServer(make_fault_app(log), host="127.0.0.1") as server:
        yield str(server.make_url("")).rstrip("/")


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        address_guard=OPEN, user_agent=UA, timeout_s=2.0, connect_timeout_s=1.0
    ) as f:
        yield f


@pytest.fixture
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def unresponsive_port() -> Iterator[int]:
    """A listening socket whose accept queue is full, so new connects hang in SYN."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for filler in fillers:
        filler.close()
    listener.close()


# --- plain responses -------------------------------------------------------------------


async def test_html_page(fetcher: Fetcher, base: str) -> None:
    result = await fetcher.fetch(f"{base}/page/3")
    assert result.status == 200
    assert result.url == result.final_url == f"{base}/page/3"
    assert result.redirects == ()
    assert result.is_html
    assert result.encoding == "utf-8"
    assert "<title>Page 3</title>" in result.text
    assert result.body.decode() == result.text
    assert 0 < result.elapsed_s < 30  # seconds, measured (not a speed check)


async def test_raw_exchange_is_kept_only_when_asked(fetcher: Fetcher, base: str) -> None:
    assert (await fetcher.fetch(f"{base}/page/3")).exchange is None
    async with Fetcher(address_guard=OPEN, user_agent=UA, record_exchanges=True) as recording:
        exchange = (await recording.fetch(f"{base}/page/3")).exchange
    assert exchange is not None
    assert exchange.method == "GET"
    assert ("User-Agent", UA) in exchange.request_headers


async def test_headers_lower_cased_and_repeats_joined(fetcher: Fetcher, base: str) -> None:
    result = await fetcher.fetch(f"{base}/status/200?h=X-Test:one&h=X-Test:two&h=X-Other:3")
    assert result.headers["x-test"] == "one, two"
    assert result.headers["x-other"] == "3"
    assert all(name == name.lower() for name in result.headers)


async def test_request_headers(fetcher: Fetcher, base: str) -> None:
    result = await fetcher.fetch(f"{base}/echo", headers={"X-Extra": "yes"})
    sent = result.text
    assert f'"user-agent": "{UA}"' in sent
    assert '"accept-encoding": "gzip, deflate, br"' in sent
    assert '"x-extra": "yes"' in sent
    assert result.encoding == "utf-8"  # application/json is text


@pytest.mark.parametrize("code", [404, 410, 403, 204])
async def test_non_retryable_status_is_returned(fetcher: Fetcher, base: str, code: int) -> None:
    result = await fetcher.fetch(f"{base}/status/{code}")
    assert result.status == code


async def test_binary_body_has_no_text(fetcher: Fetcher, base: str) -> None:
    result = await fetcher.fetch(f"{base}/binary")
    assert result.content_type == "image/png"
    assert result.body.startswith(b"\x89PNG\r\n\x1a\n")
    assert result.encoding is None
    assert result.text == ""


async def test_head_ignores_content_length_cap(base: str) -> None:
    async with Fetcher(address_guard=OPEN, user_agent=UA, max_body_bytes=100) as fetcher:
        result = await fetcher.fetch(f"{base}/big/5000", method="HEAD")
    assert result.status == 200
    assert result.body == b""


# --- redirects ---------------------------------------------------------------------------


async def test_redirect_chain(fetcher: Fetcher, base: str) -> None:
    result = await fetcher.fetch(f"{base}/redirect/3")
    assert result.status == 200
    assert result.url == f"{base}/redirect/3"
    assert result.final_url == f"{base}/redirect/0"
    assert result.redirects == tuple(f"{base}/redirect/{n}" for n in (3, 2, 1))
    assert "Redirect target" in result.text


async def test_redirect_limit(base: str) -> None:
    async with Fetcher(address_guard=OPEN, user_agent=UA, max_redirects=2) as fetcher:
        assert (await fetcher.fetch(f"{base}/redirect/2")).status == 200
        with pytest.raises(TooManyRedirects) as info:
            await fetcher.fetch(f"{base}/redirect/3")
    assert info.value.url == f"{base}/redirect/3"
    assert not info.value.transient


async def test_redirect_loop(fetcher: Fetcher, base: str, log: RequestLog) -> None:
    with pytest.raises(TooManyRedirects):
        await fetcher.fetch(f"{base}/redirect-loop/a")
    assert log.count() == 11  # the first request and max_redirects=10 hops


async def test_redirect_guard_stops_and_returns_the_redirect(fetcher: Fetcher, base: str) -> None:
    seen: list[str] = []

    def guard(url: str) -> str | None:
        seen.append(url)
        return "offsite" if url.endswith("/redirect/1") else None

    result = await fetcher.fetch(f"{base}/redirect/3", redirect_guard=guard)
    assert result.status == 302
    assert result.final_url == f"{base}/redirect/2"
    assert result.redirects == (f"{base}/redirect/3",)
    assert result.headers["location"] == "/redirect/1"
    assert seen == [f"{base}/redirect/2", f"{base}/redirect/1"]


async def test_redirect_to_non_http_is_permanent(fetcher: Fetcher, base: str) -> None:
    with pytest.raises(PermanentFetchError) as info:
        await fetcher.fetch(f"{base}/redirect-to?url=" + quote("ftp://example.com/x"))
    assert info.value.reason == "bad_redirect"


@pytest.mark.parametrize(
    ("status", "method", "body"),
    [
        (303, "GET", ""),
        (302, "GET", ""),
        (301, "GET", ""),
        (307, "POST", "a=1"),
        (308, "POST", "a=1"),
    ],
)
async def test_post_redirect_method(
    fetcher: Fetcher, base: str, status: int, method: str, body: str
) -> None:
    url = f"{base}/redirect-to?status={status}&url=/echo"
    result = await fetcher.fetch(
        url, method="POST", body=b"a=1", headers={"Content-Type": "text/plain"}
    )
    assert f'"method": "{method}"' in result.text
    assert f'"body": "{body}"' in result.text


async def test_credentials_not_sent_to_another_origin(fetcher: Fetcher, base: str) -> None:
    other = base.replace("127.0.0.1", "localhost")
    auth = {"Authorization": "Bearer secret"}
    same = await fetcher.fetch(f"{base}/redirect-to?url=/echo", headers=auth)
    assert "Bearer secret" in same.text
    cross = await fetcher.fetch(f"{base}/redirect-to?url=" + quote(f"{other}/echo"), headers=auth)
    assert cross.final_url == f"{other}/echo"
    assert "Bearer secret" not in cross.text


# --- retryable statuses ---------------------------------------------------------------


async def test_429_retry_after_seconds(fetcher: Fetcher, base: str) -> None:
    with pytest.raises(RetryableStatus) as info:
        await fetcher.fetch(f"{base}/retry-after/k1/7")
    assert info.value.status == 429
    assert info.value.reason == "http_429"
    assert info.value.retry_after_s == 7.0
    assert info.value.transient
    assert (await fetcher.fetch(f"{base}/retry-after/k1/7")).status == 200


async def test_429_retry_after_http_date(fetcher: Fetcher, base: str) -> None:
    with pytest.raises(RetryableStatus) as info:
        await fetcher.fetch(f"{base}/retry-after-date/k2/30")
    assert info.value.retry_after_s is not None
    assert 28.0 <= info.value.retry_after_s <= 31.0  # HTTP-dates have 1 s resolution


@pytest.mark.parametrize("code", [500, 502, 503, 504, 408])
async def test_retryable_status_raises(fetcher: Fetcher, base: str, code: int) -> None:
    with pytest.raises(RetryableStatus) as info:
        await fetcher.fetch(f"{base}/status/{code}")
    assert info.value.status == code
    assert info.value.retry_after_s is None


async def test_flaky_recovers(fetcher: Fetcher, base: str) -> None:
    for _ in range(2):
        with pytest.raises(RetryableStatus):
            await fetcher.fetch(f"{base}/flaky/f1/2")
    assert (await fetcher.fetch(f"{base}/flaky/f1/2")).status == 200


# --- network failures -----------------------------------------------------------------


async def test_read_timeout(base: str) -> None:
    async with Fetcher(address_guard=OPEN, user_agent=UA, timeout_s=0.3) as fetcher:
        with pytest.raises(TransientFetchError) as info:
            await fetcher.fetch(f"{base}/delay/3")
    assert info.value.reason == "timeout"


async def test_connect_timeout(unresponsive_port: int) -> None:
    async with Fetcher(
        address_guard=OPEN, user_agent=UA, timeout_s=1.5, connect_timeout_s=0.2
    ) as fetcher:
        with pytest.raises(TransientFetchError) as info:
            await fetcher.fetch(f"http://127.0.0.1:{unresponsive_port}/")
    assert info.value.reason == "timeout"
    assert info.value.detail.startswith("connect")


async def test_connection_refused(fetcher: Fetcher, free_port: int) -> None:
    with pytest.raises(TransientFetchError) as info:
        await fetcher.fetch(f"http://127.0.0.1:{free_port}/")
    assert info.value.reason == "connect_error"


async def test_dropped_connection(fetcher: Fetcher, base: str) -> None:
    with pytest.raises(TransientFetchError) as info:
        await fetcher.fetch(f"{base}/drop")
    assert info.value.reason in ("connection_reset", "payload_error")


async def test_partial_body(fetcher: Fetcher, base: str) -> None:
    with pytest.raises(TransientFetchError) as info:
        await fetcher.fetch(f"{base}/partial")
    assert info.value.reason == "payload_error"


@pytest.mark.parametrize("url", ["ftp://example.com/", "no scheme", "http:///nohost"])
async def test_invalid_url(fetcher: Fetcher, url: str) -> None:
    with pytest.raises(PermanentFetchError) as info:
        await fetcher.fetch(url)
    assert info.value.reason == "invalid_url"


def test_dns_failure_is_classified() -> None:
    key = aiohttp.client_reqrep.ConnectionKey(
        "no-such-host.invalid", 80, False, True, None, None, None
    )
    exc = aiohttp.ClientConnectorDNSError(key, socket.gaierror(-2, "Name or service not known"))
    error = _classify("http://no-such-host.invalid/", None, exc)
    assert isinstance(error, TransientFetchError)
    assert error.reason == "dns_error"


# --- size cap ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["big", "big-chunked"])
async def test_body_cap(base: str, kind: str) -> None:
    async with Fetcher(address_guard=OPEN, user_agent=UA, max_body_bytes=100_000) as fetcher:
        result = await fetcher.fetch(f"{base}/{kind}/100000")
        assert len(result.body) == 100_000
        with pytest.raises(BodyTooLarge) as info:
            await fetcher.fetch(f"{base}/{kind}/300000")
        assert info.value.limit_bytes == 100_000
        assert not info.value.transient
        # the connection was dropped, not left half-read in the pool
        assert (await fetcher.fetch(f"{base}/page/1")).status == 200


async def test_body_cap_counts_decoded_bytes(base: str) -> None:
    async with Fetcher(address_guard=OPEN, user_agent=UA, max_body_bytes=100_000) as fetcher:
        small = await fetcher.fetch(f"{base}/big/50000?encoding=gzip")
        assert len(small.body) == 50_000
        assert int(small.headers["content-length"]) < 1000  # compressed on the wire
        with pytest.raises(BodyTooLarge):
            await fetcher.fetch(f"{base}/big/5000000?encoding=gzip")


async def test_truncate_body_bytes(fetcher: Fetcher, base: str) -> None:
    result = await fetcher.fetch(f"{base}/big-chunked/300000", truncate_body_bytes=1000)
    assert len(result.body) == 1000


# --- content decoding -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "coding"), [("gzip", "gzip"), ("deflate", "deflate"), ("brotli", "br")]
)
async def test_content_encoding(fetcher: Fetcher, base: str, path: str, coding: str) -> None:
    result = await fetcher.fetch(f"{base}/{path}")
    assert result.headers["content-encoding"] == coding
    assert result.body.startswith(b"<!DOCTYPE html>")
    assert "Grüße aus der Kompression" in result.text


@pytest.mark.parametrize(
    ("where", "enc", "expected", "sample"),
    [
        ("header", "cp1251", "cp1251", 0),
        ("header", "koi8-r", "koi8-r", 0),
        ("header", "iso-8859-1", "cp1252", 1),  # WHATWG: latin-1 labels mean windows-1252
        ("meta", "koi8-r", "koi8-r", 0),
        ("meta", "cp1252", "cp1252", 1),
        ("header", "utf-8", "utf-8", 0),
    ],
)
async def test_declared_charset(
    fetcher: Fetcher, base: str, where: str, enc: str, expected: str, sample: int
) -> None:
    result = await fetcher.fetch(f"{base}/charset/{where}/{enc}")
    assert result.encoding == expected
    assert CHARSET_SAMPLES[sample] in result.text


async def test_detected_charset(fetcher: Fetcher, base: str) -> None:
    result = await fetcher.fetch(f"{base}/charset/none")
    assert result.encoding == "cp1251"
    assert "Съешь же ещё этих мягких французских булок" in result.text


# --- lifecycle --------------------------------------------------------------------------


async def test_close_is_idempotent_and_session_reopens(base: str) -> None:
    fetcher = Fetcher(address_guard=OPEN, user_agent=UA)
    await fetcher.close()
    assert (await fetcher.fetch(f"{base}/page/1")).status == 200
    await fetcher.close()
    await fetcher.close()
    assert (await fetcher.fetch(f"{base}/page/2")).status == 200
    await fetcher.close()


def test_rejects_bad_limits() -> None:
    with pytest.raises(ValueError):
        Fetcher(address_guard=OPEN, user_agent=UA, max_body_bytes=0)
    with pytest.raises(ValueError):
        Fetcher(address_guard=OPEN, user_agent=UA, max_redirects=-1)
