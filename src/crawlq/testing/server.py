"""A loopback aiohttp application with named fault endpoints (Scrapy's mock server is the model).

The endpoints are written in `crawlq.testing.fault_status` (status codes, pushback,
redirects, robots.txt, cookies) and `crawlq.testing.fault_bodies` (delays, dropped
connections, sizes, content codings, charsets); their shared state in
`crawlq.testing.fault_state`.

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

from aiohttp import web

from crawlq.testing import fault_bodies, fault_status
from crawlq.testing.fault_state import FAULT_STATE, FaultState
from crawlq.testing.log import RequestLog

__all__ = ["make_fault_app"]


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
    app.router.add_routes([*fault_status.routes(), *fault_bodies.routes()])
    return app
