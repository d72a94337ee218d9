"""Fault endpoints about the body and the connection: delays, drops, sizes, codings, charsets.

``/delay``, ``/drop``, ``/partial``, ``/big``, ``/big-chunked``, ``/gzip``, ``/deflate``,
``/brotli``, ``/charset/...``, ``/binary`` and ``/echo``: each is described in the endpoint
table of `crawlq.testing.server`. Sizes are in bytes, delays in seconds (capped at 60).
"""

from __future__ import annotations

import asyncio
import gzip
import struct
import zlib
from collections.abc import Iterator
from html import escape

import brotli  # type: ignore[import-untyped]  # brotli ships no type information
from aiohttp import web

from crawlq.testing.fault_state import html, html_response

__all__ = ["CHARSET_SAMPLES", "routes"]

CHARSET_SAMPLES = (
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Voilà l'été : café, crème brûlée et naïveté à Noël.",
)
"""Texts the charset endpoints embed: the first one that ``enc`` can encode is used."""

_RUSSIAN = (
    "Широкая электрификация южных губерний даст мощный толчок подъёму сельского хозяйства. "
    "Жил бы цитрус в чащах юга? Да, но фальшивый экземпляр! Съешь же ещё этих мягких "
    "французских булок, да выпей чаю. Любая проверка кодировки требует достаточно текста."
)
_BIG_PREFIX = b"<!doctype html><title>big</title><body>"
_CHUNK_BYTES = 64 * 1024


def routes() -> list[web.RouteDef]:
    """The routes of these endpoints, for `crawlq.testing.server.make_fault_app`."""
    return [
        web.get(r"/delay/{seconds:[\d.]+}", _delay),
        web.get("/drop", _drop),
        web.get("/partial", _partial),
        web.get(r"/big/{nbytes:\d+}", _big),
        web.get(r"/big-chunked/{nbytes:\d+}", _big),
        web.get("/gzip", _compressed),
        web.get("/deflate", _compressed),
        web.get("/brotli", _compressed),
        web.get(r"/charset/{where:header|meta}/{enc}", _charset),
        web.get("/charset/none", _charset_none),
        web.get("/binary", _binary),
        web.route("*", "/echo", _echo),
    ]


async def _delay(request: web.Request) -> web.StreamResponse:
    seconds = float(request.match_info["seconds"])
    await asyncio.sleep(min(seconds, 60.0))
    return html_response(f"Delayed {seconds} s")


async def _drop(request: web.Request) -> web.StreamResponse:
    if request.transport is not None:
        request.transport.close()
    return web.Response()  # never reaches the client: the connection is gone


async def _partial(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/html"})
    resp.content_length = 1000
    resp.force_close()
    await resp.prepare(request)
    await resp.write(b"<html><body>" + b"p" * 88)
    if request.transport is not None:
        request.transport.close()
    return resp


async def _big(request: web.Request) -> web.StreamResponse:
    nbytes = int(request.match_info["nbytes"])
    if request.query.get("encoding") == "gzip":
        body = gzip.compress(b"".join(_big_chunks(nbytes)))
        headers = {"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"}
        return web.Response(body=body, headers=headers)
    resp = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
    if request.path.startswith("/big-chunked/"):
        resp.enable_chunked_encoding()
    else:
        resp.content_length = nbytes
    await resp.prepare(request)
    if request.method != "HEAD":
        for chunk in _big_chunks(nbytes):
            await resp.write(chunk)
    await resp.write_eof()
    return resp


def _big_chunks(nbytes: int) -> Iterator[bytes]:
    head = _BIG_PREFIX[:nbytes]
    yield head
    left = nbytes - len(head)
    while left > 0:
        step = min(left, _CHUNK_BYTES)
        yield b"a" * step
        left -= step


async def _compressed(request: web.Request) -> web.StreamResponse:
    page = html("Compressed", "<p>Grüße aus der Kompression.</p>").encode("utf-8")
    coding = request.path.strip("/")
    if coding == "gzip":
        data = gzip.compress(page)
    elif coding == "deflate":
        data = zlib.compress(page)
    else:
        coding, data = "br", brotli.compress(page)
    headers = {"Content-Encoding": coding, "Content-Type": "text/html; charset=utf-8"}
    return web.Response(body=data, headers=headers)


async def _charset(request: web.Request) -> web.StreamResponse:
    enc = request.match_info["enc"]
    sample = next((s for s in CHARSET_SAMPLES if _encodable(s, enc)), None)
    if sample is None:
        raise web.HTTPBadRequest(text=f"no sample text fits encoding {enc!r}")
    if request.match_info["where"] == "header":
        page, content_type = html(sample, f"<p>{sample}</p>"), f"text/html; charset={enc}"
    else:
        meta = f'<meta charset="{escape(enc)}">'
        page, content_type = html(sample, f"<p>{sample}</p>", meta), "text/html"
    return web.Response(body=page.encode(enc), headers={"Content-Type": content_type})


def _encodable(text: str, enc: str) -> bool:
    try:
        text.encode(enc)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


async def _charset_none(request: web.Request) -> web.StreamResponse:
    page = html("Кодировка", f"<p>{_RUSSIAN}</p>")
    return web.Response(body=page.encode("cp1251"), headers={"Content-Type": "text/html"})


async def _binary(request: web.Request) -> web.StreamResponse:
    return web.Response(body=_png_1x1(), content_type="image/png")


async def _echo(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    data = {
        "method": request.method,
        "path": request.path_qs,
        "headers": {k.lower(): v for k, v in request.headers.items()},
        "body": body.decode("utf-8", errors="replace"),
    }
    return web.json_response(data)


def _png_1x1() -> bytes:
    """A valid 1x1 RGB PNG (PNG spec §5: signature, IHDR, IDAT, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )
