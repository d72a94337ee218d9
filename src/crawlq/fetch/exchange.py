"""One HTTP exchange as crawlq reads it: the head, the body, and what a failure means.

* The head (`Hop`): status, and header values decoded from their bytes (`joined_headers`),
  so nothing a server puts in a header can fail the code that stores or logs it;
  `raw_exchange` keeps the request and response heads for WARC.
* The body (`read_body`): content codings undone as it streams, and the size cap. The cap
  (``max_body_bytes``) applies to the decoded body and to the bytes received too, so a
  compression bomb or a stream of empty gzip members stops at the cap: `BodyTooLarge`, or a
  cut body when the caller asks to truncate (robots.txt, RFC 9309 §2.5). Codings (RFC 9110
  §8.4) are undone by `crawlq.web.codings`; a label that means no coding (``identity``,
  ``none``, a charset name: `crawlq.web.codings.is_identity_label`) is dropped with a debug
  line, an unknown one is ``unsupported_content_coding`` and a body that is not valid data of
  its coding a ``protocol_error`` (`PermanentFetchError`).
* Failures (`classify`): every network exception becomes a `FetchError` the retry policy
  reads, `TransientFetchError` (``timeout``, ``dns_error``, ``connect_error``,
  ``connection_reset``, ``payload_error``, ``protocol_error``, ``client_error``: worth
  retrying) or `PermanentFetchError` (``invalid_url``, ``tls_error``, and ``protocol_error``
  for a response that breaks HTTP syntax: the same bytes again next time). No aiohttp
  exception escapes `crawlq.fetch`.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp
from aiohttp.http_exceptions import BadHttpMessage

from crawlq.errors import BodyTooLarge, FetchError, PermanentFetchError, TransientFetchError
from crawlq.fetch.auth import CREDENTIAL_HEADERS, REDACTED
from crawlq.fetch.redirects import Attempt
from crawlq.request import RawExchange
from crawlq.web.codings import BodyDecoder, CodingError, UnsupportedCoding, split_codings
from crawlq.web.cookies import NO_COOKIES

__all__ = ["Hop", "classify", "joined_headers", "raw_exchange", "read_body"]

logger = logging.getLogger(__name__)


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


# -- the body --------------------------------------------------------------------------------------

_CHUNK_BYTES = 64 * 1024


async def read_body(
    resp: aiohttp.ClientResponse, url: str, cap_bytes: int, truncate_bytes: int | None
) -> bytes:
    """Read and decode the body, enforcing the cap of ``cap_bytes`` (or truncating, when asked).

    The cap applies to the decoded body, and to the bytes received too (a stream of empty
    gzip members decodes to nothing). ``Content-Encoding`` is undone by
    `crawlq.web.codings.BodyDecoder`, piece by piece, so a compression bomb stops at the cap.
    """
    limit = cap_bytes if truncate_bytes is None else truncate_bytes
    declared = resp.content_length
    if truncate_bytes is None and declared is not None and declared > limit:
        raise BodyTooLarge(url, limit)
    codings = resp.headers.getall("Content-Encoding", ())
    if not codings and declared is not None and declared <= limit:
        return await resp.read()  # the body is the declared length: within the cap
    applied, ignored = split_codings(codings)
    if ignored:
        logger.debug("%s: Content-Encoding %s taken as no coding", url, ", ".join(ignored))
    try:
        decoder = BodyDecoder(applied)
    except UnsupportedCoding as exc:
        raise PermanentFetchError(url, "unsupported_content_coding", str(exc)) from None
    body = _CappedBody(url, limit, truncate=truncate_bytes is not None)
    received = 0
    try:
        async for data in resp.content.iter_chunked(_CHUNK_BYTES):
            if not body.extend(decoder.feed(data)):
                break
            received += len(data)
            if received > limit and body.over():
                break
        else:
            body.extend(decoder.finish())
    except CodingError as exc:
        raise PermanentFetchError(url, "protocol_error", str(exc)) from None
    return body.value()


class _CappedBody:
    """Decoded pieces of a body, up to ``limit`` bytes: then `BodyTooLarge`, or a cut."""

    def __init__(self, url: str, limit: int, *, truncate: bool) -> None:
        self._url = url
        self._limit = limit
        self._truncate = truncate
        self._pieces: list[bytes] = []
        self._size = 0

    def over(self) -> bool:
        """The cap is reached: True to stop reading (truncating), else `BodyTooLarge`."""
        if self._truncate:
            return True
        raise BodyTooLarge(self._url, self._limit)

    def extend(self, pieces: Iterable[bytes]) -> bool:
        """Take ``pieces``; False once the body is cut at the cap (stop reading)."""
        for piece in pieces:
            self._size += len(piece)
            if self._size > self._limit:
                self.over()
                self._pieces.append(piece[: len(piece) - (self._size - self._limit)])
                return False
            self._pieces.append(piece)
        return True

    def value(self) -> bytes:
        """The body read."""
        return b"".join(self._pieces)


# -- failures --------------------------------------------------------------------------------------

_MAX_DETAIL_CHARS = 300  # aiohttp quotes whole bad status lines into its messages


def _malformed(exc: BaseException) -> bool:
    """Whether the server's bytes broke HTTP/1.1 syntax: the same bytes again next time.

    aiohttp reports a parse error of the response (a status line, header or ``Location``
    too long, garbage where a status line or chunk size belongs, a bad header) as a
    `aiohttp.ClientResponseError` caused by a `BadHttpMessage`. A body cut short by a reset
    or an early close is a payload error caused by a ``ContentLengthError`` or
    ``TransferEncodingError`` at end of stream: transient. (A body that cannot be decoded,
    such as bad gzip, is found by `crawlq.web.codings`, not by aiohttp.)
    """
    cause = exc.__cause__
    for _ in range(4):  # aiohttp wraps the parser's error once or twice
        if cause is None:
            return False
        if isinstance(cause, BadHttpMessage):
            return isinstance(exc, aiohttp.ClientResponseError)
        cause = cause.__cause__
    return False


def classify(url: str, redirected_to: str | None, exc: BaseException) -> FetchError:
    """Map a network exception to a classified `FetchError` (see `Fetcher.fetch`)."""
    detail = f"{type(exc).__name__}: {exc}".rstrip(": ")[:_MAX_DETAIL_CHARS]
    if redirected_to is not None:
        detail += f" (at {redirected_to})"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return TransientFetchError(url, "timeout", f"connect: {detail}")
    if isinstance(exc, TimeoutError):  # also aiohttp.ServerTimeoutError / SocketTimeoutError
        return TransientFetchError(url, "timeout", detail)
    if isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        return PermanentFetchError(url, "invalid_url", detail)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return PermanentFetchError(url, "tls_error", detail)
    if isinstance(exc, aiohttp.ClientConnectorDNSError) or (
        isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, socket.gaierror)
    ):
        return TransientFetchError(url, "dns_error", detail)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return TransientFetchError(url, "connect_error", detail)
    if _malformed(exc):
        return PermanentFetchError(url, "protocol_error", detail)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return TransientFetchError(url, "payload_error", detail)
    if isinstance(exc, aiohttp.ClientConnectionError | OSError):
        return TransientFetchError(url, "connection_reset", detail)
    if isinstance(exc, aiohttp.ClientResponseError):
        return TransientFetchError(url, "protocol_error", detail)
    return TransientFetchError(url, "client_error", detail)
