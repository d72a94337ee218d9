"""Reading a response body: content codings undone as it streams, and the size cap.

The cap (``max_body_bytes``) applies to the decoded body and to the bytes received too, so a
compression bomb or a stream of empty gzip members stops at the cap: `BodyTooLarge`, or a
cut body when the caller asks to truncate (robots.txt, RFC 9309 §2.5). Codings (RFC 9110
§8.4) are undone by `crawlq.web.codings`; a label that means no coding (``identity``, ``none``,
a charset name: `crawlq.web.codings.is_identity_label`) is dropped with a debug line, an unknown
one is ``unsupported_content_coding`` and a body that is not valid data of its coding a
``protocol_error`` (`PermanentFetchError`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import aiohttp

from crawlq.errors import BodyTooLarge, PermanentFetchError
from crawlq.web.codings import BodyDecoder, CodingError, UnsupportedCoding, split_codings

__all__ = ["read_body"]

logger = logging.getLogger(__name__)

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
