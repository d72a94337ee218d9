"""What crawlq writes for one fetched page: a ``response`` and a ``request`` WARC 1.1 record.

What a response record holds. The status line and the headers are the ones received, in
their order and spelling. The payload is the body after transfer and content decoding
(aiohttp de-chunks and `crawlq.web.codings` decompresses while reading, every layer of
``Content-Encoding``; the coded bytes are not kept). So that the record stays self-consistent
and every WARC reader can parse it, a response that came with ``Content-Encoding`` or
``Transfer-Encoding`` has those headers and ``Content-Length`` renamed to
``X-Crawlq-Orig-Content-Encoding`` (and so on) and a ``Content-Length`` of the decoded payload
added. Responses without either header are recorded exactly as received. Redirect hops that
were followed are not archived; the record is the response that was stored as the page, under
its final URL.

The request record is the request line and headers as sent (``WARC-Concurrent-To`` the
response, set by warcio's ``write_request_response_pair``). A result without a
`crawlq.request.RawExchange` (a custom fetcher) gets a head rebuilt from its headers.
"""

from __future__ import annotations

import http
import io
from typing import Any
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawlq.request import FetchResult, RawExchange

__all__ = ["ORIGINAL_PREFIX", "request_record", "response_record"]

_DECODED_HEADERS = frozenset({"content-encoding", "transfer-encoding"})
ORIGINAL_PREFIX = "X-Crawlq-Orig-"
"""Prefix of the received headers that described the wire encoding (module docstring)."""


def response_record(builder: WARCWriter, result: FetchResult, date: str) -> Any:
    """The ``response`` record of ``result``, dated ``date`` (ISO 8601, WARC-Date)."""
    exchange = result.exchange or _rebuilt(result)
    headers = _archived_headers(exchange.response_headers, len(result.body))
    status = f"{result.status} {exchange.reason}".rstrip()
    http_headers = StatusAndHeaders(status, headers, protocol=f"HTTP/{exchange.http_version}")
    return builder.create_warc_record(
        result.final_url,
        "response",
        payload=io.BytesIO(result.body),
        length=len(result.body),
        http_headers=http_headers,
        warc_headers_dict={"WARC-Date": date},
    )


def request_record(builder: WARCWriter, result: FetchResult, date: str) -> Any:
    """The ``request`` record of ``result``, dated ``date``."""
    exchange = result.exchange or _rebuilt(result)
    parts = urlsplit(result.final_url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    line = f"{exchange.method} {target} HTTP/{exchange.http_version}"
    http_headers = StatusAndHeaders(line, list(exchange.request_headers), is_http_request=True)
    return builder.create_warc_record(
        result.final_url,
        "request",
        payload=io.BytesIO(exchange.request_body),
        length=len(exchange.request_body),
        http_headers=http_headers,
        warc_headers_dict={"WARC-Date": date},
    )


def _archived_headers(
    received: tuple[tuple[str, str], ...], payload_bytes: int
) -> list[tuple[str, str]]:
    """The response headers to record with a decoded payload (module docstring)."""
    if not any(name.lower() in _DECODED_HEADERS for name, _ in received):
        return list(received)
    out: list[tuple[str, str]] = []
    for name, value in received:
        if name.lower() in _DECODED_HEADERS or name.lower() == "content-length":
            out.append((ORIGINAL_PREFIX + name, value))
        else:
            out.append((name, value))
    out.append(("Content-Length", str(payload_bytes)))
    return out


def _rebuilt(result: FetchResult) -> RawExchange:
    """A head for a result that carries no `RawExchange` (a custom fetcher)."""
    try:
        reason = http.HTTPStatus(result.status).phrase
    except ValueError:
        reason = ""
    return RawExchange(
        method="GET",
        request_headers=(("Host", urlsplit(result.final_url).netloc),),
        request_body=b"",
        http_version="1.1",
        reason=reason,
        response_headers=tuple(result.headers.items()),
    )
