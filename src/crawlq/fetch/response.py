"""The response of one HTTP exchange as crawlq keeps it: status, headers decoded without loss.

`Hop` is one exchange (or where a followed redirect goes next). Header values are decoded
from their bytes (`joined_headers`), so nothing a server puts in a header can fail the code
that stores or logs it. `raw_exchange` keeps the request and response heads for WARC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp

from crawlq.fetch.auth import CREDENTIAL_HEADERS, REDACTED
from crawlq.fetch.redirects import Attempt
from crawlq.request import RawExchange
from crawlq.web.cookies import NO_COOKIES

__all__ = ["Hop", "joined_headers", "raw_exchange"]


@dataclass(slots=True)
class Hop:
    """One HTTP exchange: the response, or where to go next when it is a followed redirect."""

    status: int
    headers: dict[str, str]
    body: bytes
    next_url: str | None
    exchange: RawExchange | None = None
    location: str | None = None  # a redirect not followed: its resolved target
    cookies: Mapping[str, str] = field(default_factory=lambda: NO_COOKIES)  # a redirect's target


def joined_headers(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """Lower-case header names and join repeated headers with ", " (RFC 9110 §5.3).

    Values are decoded from the bytes received: as UTF-8 when they are valid UTF-8, else as
    ISO-8859-1, which maps every byte to a character (RFC 9110 §5.5 calls bytes beyond ASCII
    ``obs-text``, opaque data; WHATWG Fetch reads header values byte for byte, "isomorphic
    decode"). So no value holds a lone surrogate (aiohttp's own decoding keeps undecodable
    bytes as surrogates, which no store, log or JSON encoder can write) whatever the server
    sends.
    """
    out: dict[str, str] = {}
    for name_bytes, value_bytes in raw:
        key = name_bytes.decode("latin-1").lower()
        try:
            value = value_bytes.decode("utf-8")
        except UnicodeDecodeError:
            value = value_bytes.decode("latin-1")
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def raw_exchange(
    attempt: Attempt, resp: aiohttp.ClientResponse, *, redact: bool = True
) -> RawExchange:
    """The request sent and the response head received, as `RawExchange` records them.

    With ``redact``, the values of credential headers (`CREDENTIAL_HEADERS`) are recorded
    as `REDACTED` (``--warc-keep-auth`` turns it off).
    """
    version = resp.version
    sent = resp.request_info.headers.items()
    return RawExchange(
        method=attempt.method,
        request_headers=tuple(
            (name, REDACTED if _hidden(name, redact) else value) for name, value in sent
        ),
        request_body=attempt.body,
        http_version=f"{version.major}.{version.minor}" if version else "1.1",
        reason=resp.reason or "",
        response_headers=tuple(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in resp.raw_headers
        ),
    )


def _hidden(name: str, redact: bool) -> bool:
    """Whether a request header's value is recorded `REDACTED` (a proxy's credential always)."""
    lower = name.lower()
    return lower == "proxy-authorization" or (redact and lower in CREDENTIAL_HEADERS)
