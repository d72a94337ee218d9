"""A loopback aiohttp application with named fault endpoints (Scrapy's mock server is the model).

The module holds the application (`make_fault_app`), its mutable state (`FaultState`: a test
changes it between requests, robots.txt or the ``/switch`` flag, through `fault_state`;
counters keyed by ``kind:key`` make ``/flaky``, ``/busy`` and the like fail a set number of
times per key), then its endpoints in two groups: those answered by status and headers
(errors, pushback, redirects, robots.txt, cookies) and those about the body and the
connection (delays, drops, sizes, content codings, charsets; sizes are in bytes, delays in
seconds, capped at 60).

Endpoints of `make_fault_app` (``{key}`` scopes a per-application counter, so tests that
pick distinct keys do not interfere):

================================  ==========================================================
``/page/{n}``                     HTML page titled "Page n" linking to pages n+1 and n+2
``/status/{code}?h=Name:value``   that status (200-599), small text body; each ``h`` adds a
                                  response header (repeat a name to send it twice)
``/flaky/{key}/{fails}``          500 for the first ``fails`` requests of ``key``, then 200
``/retry-after/{key}/{s}``        first request 429 with ``Retry-After: s``, then 200
``/retry-after-date/{key}/{s}``   the same with an HTTP-date ``s`` seconds ahead
``/busy/{key}/{fails}``           the first ``fails`` requests of ``key`` get 503
                                  (``?status=429`` picks the code, ``?retry_after=S`` adds
                                  ``Retry-After: S``), then 200
``/redirect/{n}``                 chain of ``n`` 302 redirects ending at a 200 page
                                  (``?status=301`` picks the redirect code; ``?to=/path``
                                  makes the last hop go to ``/path`` instead)
``/redirect-to?url=U&status=C``   one redirect (default 302) to ``U``; each
                                  ``&set_cookie=V`` adds a ``Set-Cookie: V`` header
``/redirect-loop/a``, ``/b``      a redirects to b, b to a
``/self-redirect/{key}``          the first request of ``key`` a 302 to itself plus
                                  ``#top``, then a 200 page "Self key" (``?forever=1``:
                                  always the 302)
``/query-order/{asc|desc}?Q``     a 302 to the same query sorted by name (``desc``:
                                  reversed) unless it is already so; then a 200 page
                                  titled "Query Q"
``/switch/{name}``                503 while `FaultState.switch_down` is set, then a 200 page
                                  titled ``name`` (a host that fails until a flag flips)
``/delay/{s}``                    sleeps ``s`` seconds before answering 200
``/drop``                         closes the connection without a response
``/partial``                      ``Content-Length: 1000`` but 100 bytes sent, then closes
``/big/{nbytes}``                 200 ``text/html`` body of ``nbytes``, streamed, with
                                  ``Content-Length``
                                  (``?encoding=gzip``: gzip-compressed, not streamed)
``/big-chunked/{nbytes}``         the same with chunked transfer (no ``Content-Length``)
``/gzip``, ``/deflate``,          an HTML page with that ``Content-Encoding``
``/brotli``
``/charset/header/{enc}``         page encoded in ``enc``, declared in ``Content-Type``
``/charset/meta/{enc}``           page encoded in ``enc``, declared in ``<meta charset>``
``/charset/none``                 cp1251 Russian page with no declaration at all
``/robots.txt``                   `FaultState.robots_txt` with `FaultState.robots_status`
                                  and `FaultState.robots_headers`
``/robots-body``                  `FaultState.robots_txt` with status 200 (a redirect target)
``/binary``                       a 1x1 ``image/png``
``/echo``                         JSON of the request: method, path, headers, body (any
                                  method)
``/cookie-wall/{key}``            a cookie wall: without the cookie ``wall_{key}=passed``, a
                                  302 to itself with ``Set-Cookie: wall_{key}=passed;
                                  Path=/``; with it, a 200 HTML page "Behind wall key".
                                  ``?never=1``: always the 302; ``?count=1``: always a 302
                                  setting ``wall_{key}`` to the request's number (a new
                                  value each time)
``/set-cookie/{name}/{value}``    200 HTML page with ``Set-Cookie: name=value; Path=/`` (a
                                  session cookie; ``?attrs=A`` appends ``; A``), linking to
                                  each ``?link=URL``
================================  ==========================================================
"""

from __future__ import annotations

import asyncio
import collections
import gzip
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from html import escape
from urllib.parse import urlencode

import brotli  # type: ignore[import-untyped]  # brotli ships no type information
from aiohttp import web
from multidict import CIMultiDict

from crawlq.testing.request_log import RequestLog

__all__ = ["CHARSET_SAMPLES", "FAULT_STATE", "FaultState", "fault_state", "make_fault_app"]


@dataclass
class FaultState:
    """Mutable state of one fault application; change it between requests in a test.

    Attributes:
        robots_txt: Body served at ``/robots.txt``.
        robots_status: Status served at ``/robots.txt``.
        robots_headers: Extra headers served at ``/robots.txt`` (``Location`` for redirects).
        counters: Requests seen per counter key (``flaky:KEY``, ``retry-after:KEY``).
        switch_down: ``/switch/{name}`` answers 503 while True.
    """

    robots_txt: str = "User-agent: *\nDisallow: /private/\n"
    robots_status: int = 200
    robots_headers: dict[str, str] = field(default_factory=dict)
    counters: collections.Counter[str] = field(default_factory=collections.Counter)
    switch_down: bool = False


FAULT_STATE = web.AppKey("crawlq_fault_state", FaultState)
"""Where `make_fault_app` keeps its `FaultState` (``app[FAULT_STATE]``)."""


def fault_state(app: web.Application) -> FaultState:
    """Return the mutable `FaultState` of an application built by `make_fault_app`."""
    return app[FAULT_STATE]


def _html(title: str, body: str = "", meta: str = "") -> str:
    """A small HTML page: ``title`` as its title and heading, then ``body`` (HTML)."""
    return (
        f"<!DOCTYPE html>\n<html><head>{meta}<title>{escape(title)}</title></head>\n"
        f"<body><h1>{escape(title)}</h1>\n{body}</body></html>\n"
    )


def _html_response(title: str, body: str = "", status: int = 200) -> web.Response:
    """`_html` as a ``text/html`` response with ``status``."""
    return web.Response(text=_html(title, body), status=status, content_type="text/html")


def _bump(request: web.Request, kind: str) -> int:
    """Count one more request of ``kind`` for the URL's ``{key}``; return the new count."""
    counters = request.app[FAULT_STATE].counters
    key = f"{kind}:{request.match_info['key']}"
    counters[key] += 1
    return counters[key]


def make_fault_app(log: RequestLog | None = None) -> web.Application:
    """Build the fault application (endpoints in the module docstring).

    Args:
        log: Records every request when given.

    Returns:
        An aiohttp application; serve it with ``aiohttp.test_utils.TestServer`` or
        `ServerThread` (both bind loopback only).
    """
    app = web.Application(middlewares=[log.middleware()] if log is not None else [])
    app[FAULT_STATE] = FaultState()
    app.router.add_routes([*_status_routes(), *_body_routes()])
    return app


# -- endpoints answered by status and headers ------------------------------------------------------


def _status_routes() -> list[web.RouteDef]:
    """The routes of the endpoints answered by status and headers."""
    return [
        web.get(r"/page/{n:\d+}", _page),
        web.get(r"/status/{code:\d+}", _status),
        web.get(r"/flaky/{key}/{fails:\d+}", _flaky),
        web.get(r"/retry-after/{key}/{seconds:\d+}", _retry_after),
        web.get(r"/retry-after-date/{key}/{seconds:\d+}", _retry_after),
        web.get(r"/busy/{key}/{fails:\d+}", _busy),
        web.get(r"/redirect/{n:\d+}", _redirect_chain),
        web.route("*", "/redirect-to", _redirect_to),
        web.get(r"/redirect-loop/{side:[ab]}", _redirect_loop),
        web.get(r"/self-redirect/{key}", _self_redirect),
        web.get(r"/query-order/{order:asc|desc}", _query_order),
        web.get(r"/switch/{name}", _switch),
        web.get("/robots.txt", _robots),
        web.get("/robots-body", _robots),
        web.get(r"/cookie-wall/{key}", _cookie_wall),
        web.get(r"/set-cookie/{name}/{value}", _set_cookie),
    ]


async def _page(request: web.Request) -> web.StreamResponse:
    n = int(request.match_info["n"])
    links = "".join(f'<a href="/page/{k}">page {k}</a>\n' for k in (n + 1, n + 2))
    return _html_response(f"Page {n}", f"<p>This is page {n}.</p>\n{links}")


async def _status(request: web.Request) -> web.StreamResponse:
    code = int(request.match_info["code"])
    if not 200 <= code <= 599:
        raise web.HTTPBadRequest(text="status must be 200-599")
    headers = CIMultiDict[str]()
    for item in request.query.getall("h", []):
        name, _, value = item.partition(":")
        headers.add(name.strip(), value.strip())
    if code in (204, 304):
        return web.Response(status=code, headers=headers)
    return web.Response(status=code, text=f"status {code}\n", headers=headers)


async def _flaky(request: web.Request) -> web.StreamResponse:
    seen = _bump(request, "flaky")
    if seen <= int(request.match_info["fails"]):
        return _html_response(f"Failure {seen}", status=500)
    return _html_response("Recovered")


async def _switch(request: web.Request) -> web.StreamResponse:
    if request.app[FAULT_STATE].switch_down:
        return _html_response("Down for now", status=503)
    return _html_response(request.match_info["name"])


async def _retry_after(request: web.Request) -> web.StreamResponse:
    if _bump(request, "retry-after") > 1:
        return _html_response("After the wait")
    seconds = int(request.match_info["seconds"])
    if request.path.startswith("/retry-after-date/"):
        value = formatdate(time.time() + seconds, usegmt=True)
    else:
        value = str(seconds)
    return web.Response(status=429, text="slow down\n", headers={"Retry-After": value})


async def _busy(request: web.Request) -> web.StreamResponse:
    seen = _bump(request, "busy")
    if seen > int(request.match_info["fails"]):
        return _html_response("Not busy any more")
    headers = {}
    if "retry_after" in request.query:
        headers["Retry-After"] = request.query["retry_after"]
    status = int(request.query.get("status", "503"))
    return web.Response(status=status, text="busy\n", headers=headers)


def _redirect(location: str, status: int = 302) -> web.Response:
    if status not in (301, 302, 303, 307, 308):
        raise web.HTTPBadRequest(text="redirect status must be 301, 302, 303, 307 or 308")
    return web.Response(status=status, headers={"Location": location})


async def _redirect_chain(request: web.Request) -> web.StreamResponse:
    n = int(request.match_info["n"])
    status = int(request.query.get("status", "302"))
    if n == 0:
        return _html_response("Redirect target")
    if n == 1 and "to" in request.query:
        return _redirect(request.query["to"], status)
    return _redirect(f"/redirect/{n - 1}?{request.query_string}".rstrip("?"), status)


async def _redirect_to(request: web.Request) -> web.StreamResponse:
    target = request.query.get("url")
    if not target:
        raise web.HTTPBadRequest(text="missing ?url=")
    response = _redirect(target, int(request.query.get("status", "302")))
    for cookie in request.query.getall("set_cookie", []):
        response.headers.add("Set-Cookie", cookie)
    return response


async def _redirect_loop(request: web.Request) -> web.StreamResponse:
    other = "b" if request.match_info["side"] == "a" else "a"
    return _redirect(f"/redirect-loop/{other}")


async def _self_redirect(request: web.Request) -> web.StreamResponse:
    key = request.match_info["key"]
    if "forever" in request.query or _bump(request, "self-redirect") == 1:
        return _redirect(f"{request.path_qs}#top")
    return _html_response(f"Self {key}", "<p>After one redirect to itself.</p>")


async def _query_order(request: web.Request) -> web.StreamResponse:
    params = list(request.query.items())
    wanted = sorted(params, key=lambda kv: kv[0], reverse=request.match_info["order"] == "desc")
    if params != wanted:
        return _redirect(f"{request.path}?{urlencode(wanted)}")
    return _html_response(f"Query {request.query_string}")


async def _robots(request: web.Request) -> web.StreamResponse:
    state = request.app[FAULT_STATE]
    if request.path == "/robots-body":
        return web.Response(text=state.robots_txt, content_type="text/plain")
    return web.Response(
        status=state.robots_status,
        text=state.robots_txt,
        content_type="text/plain",
        headers=state.robots_headers,
    )


async def _cookie_wall(request: web.Request) -> web.StreamResponse:
    key = request.match_info["key"]
    name = f"wall_{key}"
    if request.cookies.get(name) == "passed" and "never" not in request.query:
        return _html_response(f"Behind wall {key}", "<p>The content behind the wall.</p>")
    value = "passed"
    if "count" in request.query:
        value = str(_bump(request, "cookie-wall"))
    location = request.path_qs
    headers = {"Location": location, "Set-Cookie": f"{name}={value}; Path=/"}
    return web.Response(status=302, headers=headers)


async def _set_cookie(request: web.Request) -> web.StreamResponse:
    name, value = request.match_info["name"], request.match_info["value"]
    cookie = f"{name}={value}; Path=/"
    if "attrs" in request.query:
        cookie += "; " + request.query["attrs"]
    links = "".join(
        f'<a href="{escape(url, quote=True)}">{escape(url)}</a>\n'
        for url in request.query.getall("link", [])
    )
    response = _html_response(f"Cookie {name}", links)
    response.headers["Set-Cookie"] = cookie
    return response


# -- endpoints about the body and the connection ---------------------------------------------------

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


def _body_routes() -> list[web.RouteDef]:
    """The routes of the endpoints about the body and the connection."""
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
    return _html_response(f"Delayed {seconds} s")


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
    page = _html("Compressed", "<p>Grüße aus der Kompression.</p>").encode("utf-8")
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
        page, content_type = _html(sample, f"<p>{sample}</p>"), f"text/html; charset={enc}"
    else:
        meta = f'<meta charset="{escape(enc)}">'
        page, content_type = _html(sample, f"<p>{sample}</p>", meta), "text/html"
    return web.Response(body=page.encode(enc), headers={"Content-Type": content_type})


def _encodable(text: str, enc: str) -> bool:
    try:
        text.encode(enc)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


async def _charset_none(request: web.Request) -> web.StreamResponse:
    page = _html("Кодировка", f"<p>{_RUSSIAN}</p>")
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
