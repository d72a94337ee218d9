"""Malformed HTTP from raw-socket loopback servers: permanent; a cut-short body: transient."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from crawlq.errors import FetchError
from crawlq.fetch import Fetcher
from crawlq.rules.retry import decide
from crawlq.web.addresses import AddressGuard

HEAD_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"

MALFORMED = {
    "header_too_long": HEAD_OK + b"X-Big: " + b"a" * 100_000 + b"\r\nContent-Length: 2\r\n\r\nok",
    "location_too_long": (
        b"HTTP/1.1 302 Found\r\nLocation: /" + b"a" * 100_000 + b"\r\nContent-Length: 0\r\n\r\n"
    ),
    "status_line_too_long": b"HTTP/1.1 200 " + b"O" * 100_000 + b"\r\nContent-Length: 2\r\n\r\nok",
    "bad_status_line": b"HTTX/1.1 abc OK\r\nContent-Length: 2\r\n\r\nok",
    "bad_header": HEAD_OK + b"Bad Header\x01: x\r\nContent-Length: 2\r\n\r\nok",
    "garbage_after_body": HEAD_OK + b"Content-Length: 2\r\n\r\nokGARBAGE GARBAGE\r\n\r\n",
    "bad_chunk_size": HEAD_OK + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    "two_content_lengths": HEAD_OK + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nok",
    "bad_gzip": HEAD_OK + b"Content-Encoding: gzip\r\nContent-Length: 20\r\n\r\n" + b"x" * 20,
}

CUT_SHORT = {
    "truncated_body": HEAD_OK + b"Content-Length: 200\r\n\r\nok",
    "truncated_chunks": HEAD_OK + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhel",
}


@asynccontextmanager
async def raw_server(payload: bytes | None) -> AsyncIterator[str]:
    """A loopback server sending ``payload`` to every request, then closing (None: a reset
    in the middle of the body)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        if payload is None:
            writer.write(HEAD_OK + b"Content-Length: 100\r\n\r\nab")
            await writer.drain()
            writer.transport.abort()
            return
        writer.write(payload)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/x"
    finally:
        server.close()
        await server.wait_closed()


async def fetch_error(payload: bytes | None) -> FetchError:
    async with (
        raw_server(payload) as url,
        Fetcher(
            user_agent="t", timeout_s=10, address_guard=AddressGuard.of(allow_private=True)
        ) as fetcher,
    ):
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(url, follow_redirects=False)
    return info.value


@pytest.mark.parametrize("name", sorted(MALFORMED))
async def test_malformed_responses_are_permanent_protocol_errors(name: str) -> None:
    error = await fetch_error(MALFORMED[name])
    assert (error.reason, error.transient) == ("protocol_error", False), str(error)
    decision = decide(error, 1, max_retries=4, base_s=1.0, cap_s=10.0)
    assert not decision.retry  # dead on the first attempt


@pytest.mark.parametrize("name", [*sorted(CUT_SHORT), "reset_mid_body"])
async def test_cut_short_bodies_stay_transient(name: str) -> None:
    error = await fetch_error(CUT_SHORT.get(name))
    assert error.transient and error.reason == "payload_error", str(error)


async def test_a_malformed_page_is_dead_after_one_request(tmp_path: Path) -> None:
    from tests.engine.conftest import crawl

    requests = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        head = await reader.readuntil(b"\r\n\r\n")
        if head.startswith(b"GET /robots.txt"):
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        else:
            requests += 1
            writer.write(MALFORMED["header_too_long"])
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/page"
    try:
        results = await crawl(tmp_path / "s.db", [url], max_retries=4)
    finally:
        server.close()
        await server.wait_closed()
    assert results.outcome(url) == "dead"
    assert results.dead[url].reason == "protocol_error"
    assert requests == 1
