"""Failure classification: every network exception becomes a `FetchError` the retry policy reads.

`classify` maps aiohttp's and the OS's exceptions to `TransientFetchError` (``timeout``,
``dns_error``, ``connect_error``, ``connection_reset``, ``payload_error``,
``protocol_error``, ``client_error``: worth retrying) or `PermanentFetchError`
(``invalid_url``, ``tls_error``, and ``protocol_error`` for a response that breaks HTTP
syntax: the same bytes again next time). No aiohttp exception escapes `crawlq.fetch`.
"""

from __future__ import annotations

import socket

import aiohttp
from aiohttp.http_exceptions import BadHttpMessage

from crawlq.errors import FetchError, PermanentFetchError, TransientFetchError

__all__ = ["classify"]

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
