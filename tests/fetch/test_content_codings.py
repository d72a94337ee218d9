"""Fetcher: layered content codings decoded in reverse order, unknown ones refused, bombs capped.

Responses come byte for byte from a raw loopback server (`tests.raw_server`): aiohttp's own
server would not send two ``Content-Encoding`` lines or a coding it does not know.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator

import brotli  # type: ignore[import-untyped]
import pytest

from crawlq.errors import BodyTooLarge, FetchError
from crawlq.fetch import Fetcher
from crawlq.web.addresses import AddressGuard
from tests.raw_server import RawServer, response
from tests.unit.test_codings import zeros_br, zeros_gzip

PAGE = b"<!DOCTYPE html><title>layered</title><p>" + "Grüße ".encode() * 2000
HTML = ("Content-Type", "text/html; charset=utf-8")
OPEN = AddressGuard(allow_private=True)


def coded(body: bytes, *encodings: str) -> bytes:
    """``Content-Encoding`` lines (one per argument) and the body coded as they say."""
    headers = [HTML] + [("Content-Encoding", value) for value in encodings]
    for value in encodings:
        for coding in value.split(","):
            coding = coding.strip()
            if coding in ("gzip", "x-gzip"):
                body = gzip.compress(body)
            elif coding == "deflate":
                body = zlib.compress(body)
            elif coding == "br":
                body = brotli.compress(body)
    return response(body, headers)


def raw_deflate(body: bytes) -> bytes:
    obj = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return obj.compress(body) + obj.flush()


def chunked(body: bytes, headers: list[tuple[str, str]]) -> bytes:
    """A chunked response (no Content-Length), 1000-byte chunks."""
    head = "".join(f"{n}: {v}\r\n" for n, v in headers)
    out = [f"HTTP/1.1 200 OK\r\n{head}Transfer-Encoding: chunked\r\n\r\n".encode()]
    for start in range(0, len(body), 1000):
        piece = body[start : start + 1000]
        out.append(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    return b"".join([*out, b"0\r\n\r\n"])


GZIP_BOMB = zeros_gzip(64)  # 64 MiB of zeros in ~65 kB
BR_BOMB = zeros_br(64)

ROUTES = {
    "/gzip": coded(PAGE, "gzip"),
    "/gzip-gzip": coded(PAGE, "gzip, gzip"),
    "/deflate-gzip": coded(PAGE, "deflate, gzip"),
    "/two-lines": coded(PAGE, "deflate", "gzip"),
    "/br-gzip-deflate": coded(PAGE, "br, gzip, deflate"),
    "/x-gzip": coded(PAGE, "x-gzip"),
    "/identity": coded(PAGE, "identity"),
    "/identity-gzip": coded(PAGE, "identity, gzip"),
    "/GZIP": response(gzip.compress(PAGE), [HTML, ("Content-Encoding", " GZip ")]),
    "/raw-deflate": response(raw_deflate(PAGE), [HTML, ("Content-Encoding", "deflate")]),
    "/chunked-gzip-gzip": chunked(
        gzip.compress(gzip.compress(PAGE)), [HTML, ("Content-Encoding", "gzip, gzip")]
    ),
    "/compress": response(PAGE, [HTML, ("Content-Encoding", "compress")]),
    "/zstd": response(PAGE, [HTML, ("Content-Encoding", "zstd")]),
    "/gzip-unknown": response(gzip.compress(PAGE), [HTML, ("Content-Encoding", "gzip, foo")]),
    "/five": coded(PAGE, "gzip, gzip, gzip, gzip, gzip"),
    "/bad-inner": response(
        gzip.compress(b"not deflate data"), [HTML, ("Content-Encoding", "deflate, gzip")]
    ),
    "/gzip-bomb": response(GZIP_BOMB, [HTML, ("Content-Encoding", "gzip")]),
    "/gzip-gzip-bomb": response(
        gzip.compress(GZIP_BOMB), [HTML, ("Content-Encoding", "gzip, gzip")]
    ),
    "/deflate-bomb": response(
        zlib.compress(bytes(32 << 20), 9), [HTML, ("Content-Encoding", "deflate")]
    ),
    "/br-bomb": response(BR_BOMB, [HTML, ("Content-Encoding", "br")]),
    "/empty-members": chunked(
        gzip.compress(b"") * 20_000, [HTML, ("Content-Encoding", "gzip")]
    ),  # 400 kB that decode to nothing, without a Content-Length: the bytes received count
}


@pytest.fixture(scope="module")
def server() -> Iterator[RawServer]:
    with RawServer(ROUTES) as running:
        yield running


@pytest.mark.parametrize(
    "path",
    [
        "/gzip",
        "/gzip-gzip",
        "/deflate-gzip",
        "/two-lines",
        "/br-gzip-deflate",
        "/x-gzip",
        "/identity",
        "/identity-gzip",
        "/GZIP",
        "/raw-deflate",
        "/chunked-gzip-gzip",
    ],
)
async def test_codings_are_decoded_in_reverse_order(server: RawServer, path: str) -> None:
    async with Fetcher(user_agent="t", address_guard=OPEN) as fetcher:
        result = await fetcher.fetch(server.base_url + path)
    assert result.body == PAGE
    assert result.encoding == "utf-8" and "Grüße" in result.text
    assert result.is_html


async def test_repeated_content_encoding_lines_are_joined_in_headers(server: RawServer) -> None:
    async with Fetcher(user_agent="t", address_guard=OPEN) as fetcher:
        result = await fetcher.fetch(server.base_url + "/two-lines")
    assert result.headers["content-encoding"] == "deflate, gzip"


@pytest.mark.parametrize(
    ("path", "coding"),
    [("/compress", "compress"), ("/zstd", "zstd"), ("/gzip-unknown", "foo"), ("/five", "5")],
)
async def test_an_unknown_coding_is_a_permanent_error(
    server: RawServer, path: str, coding: str
) -> None:
    async with Fetcher(user_agent="t", address_guard=OPEN) as fetcher:
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(server.base_url + path)
    assert (info.value.reason, info.value.transient) == ("unsupported_content_coding", False)
    assert coding in info.value.detail


async def test_corrupt_inner_layer_is_a_protocol_error(server: RawServer) -> None:
    async with Fetcher(user_agent="t", address_guard=OPEN) as fetcher:
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(server.base_url + "/bad-inner")
    assert (info.value.reason, info.value.transient) == ("protocol_error", False)
    assert "bad deflate data" in info.value.detail


@pytest.mark.parametrize(
    "path", ["/gzip-bomb", "/gzip-gzip-bomb", "/deflate-bomb", "/br-bomb", "/empty-members"]
)
async def test_a_bomb_stops_at_the_cap(server: RawServer, path: str) -> None:
    limit = 300_000
    async with Fetcher(user_agent="t", address_guard=OPEN, max_body_bytes=limit) as fetcher:
        with pytest.raises(BodyTooLarge) as info:
            await fetcher.fetch(server.base_url + path)
        assert info.value.limit_bytes == limit
        # the connection was dropped, not left half-read in the pool
        assert (await fetcher.fetch(server.base_url + "/gzip-gzip")).body == PAGE


@pytest.mark.parametrize("path", ["/gzip-bomb", "/gzip-gzip-bomb", "/br-bomb", "/gzip-gzip"])
async def test_truncation_cuts_the_decoded_body(server: RawServer, path: str) -> None:
    async with Fetcher(user_agent="t", address_guard=OPEN) as fetcher:
        result = await fetcher.fetch(server.base_url + path, truncate_body_bytes=5000)
    assert len(result.body) == 5000
    assert result.body == (PAGE if path == "/gzip-gzip" else bytes(5000))[:5000]
