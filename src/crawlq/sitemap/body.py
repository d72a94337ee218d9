"""A sitemap body as a stream of uncompressed chunks, under the size limit.

A body that starts with the gzip magic bytes is gunzipped here, every member (RFC 1952
§2.2), whatever its URL or ``Content-Type`` says; at most ``max_bytes`` of output are
produced, then the sitemap is marked ``too_large``. A broken gzip stream adds
``sitemap_gzip_error`` to the sitemap's problems; nothing is raised.
"""

from __future__ import annotations

import codecs
import zlib
from collections.abc import Iterator

from crawlq.sitemap.model import Sitemap

__all__ = ["body_chunks", "first_content"]

_CHUNK_BYTES = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_BLANK = b" \t\r\n"


def first_content(chunks: Iterator[bytes]) -> bytes:
    """The body from its first byte that is neither a UTF-8 byte order mark nor a blank.

    Leading blanks are dropped chunk by chunk (never accumulated), so a body of 50 MB of
    newlines costs one pass. Empty when there is no such byte.
    """
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) < len(codecs.BOM_UTF8):
            continue  # a gzip stream may start with very short pieces
        head = head.removeprefix(codecs.BOM_UTF8)
        break
    head = head.lstrip(_BLANK)
    while not head:
        more = next(chunks, None)
        if more is None:
            break
        head = more.lstrip(_BLANK)
    return head


def body_chunks(body: bytes, max_bytes: int, sitemap: Sitemap) -> Iterator[bytes]:
    """The uncompressed body in chunks, at most ``max_bytes`` of it (then ``too_large``)."""
    if body.startswith(_GZIP_MAGIC):
        yield from _gunzip(body, max_bytes, sitemap)
        return
    view = memoryview(body)
    if len(view) > max_bytes:
        sitemap.too_large = True
        view = view[:max_bytes]
    for start in range(0, len(view), _CHUNK_BYTES):
        yield bytes(view[start : start + _CHUNK_BYTES])


def _gunzip(body: bytes, max_bytes: int, sitemap: Sitemap) -> Iterator[bytes]:
    """Gunzip ``body`` as a stream (every member), stopping after ``max_bytes`` of output.

    A compressed body longer than ``max_bytes`` is cut there (the fetcher reads no more),
    so its end is missing: that counts as ``too_large``, not as a broken stream.
    """
    cut = len(body) > max_bytes
    if cut:
        sitemap.too_large = True
        body = body[:max_bytes]
    left = max_bytes
    data = body
    try:
        while data:
            inflater = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer
            while data and not inflater.eof:
                out = inflater.decompress(data, min(_CHUNK_BYTES, left + 1))
                data = inflater.unconsumed_tail
                if len(out) > left:
                    sitemap.too_large = True
                    yield out[:left]
                    return
                left -= len(out)
                if out:
                    yield out
            if not inflater.eof:
                if not cut:
                    sitemap.problems.append("sitemap_gzip_error: the gzip stream is cut short")
                return
            data = inflater.unused_data  # another gzip member follows (RFC 1952 §2.2)
            if data and not data.startswith(_GZIP_MAGIC):
                return  # trailing garbage after the last member: ignored, as gzip(1) does
    except zlib.error as exc:
        sitemap.problems.append(f"sitemap_gzip_error: {exc}")
