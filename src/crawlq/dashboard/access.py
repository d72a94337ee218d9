"""Who may see the dashboard: the loopback test, the token check, the security headers.

Bound to 127.0.0.1 by default. Bound to any other address it needs a token, and with a
token every request must carry it (an ``Authorization: Bearer TOKEN`` header, a ``token``
query parameter or the cookie `TOKEN_COOKIE` set when one was given that way), compared in
constant time (`hmac.compare_digest`); a request without it gets 401 and nothing else. Every
response carries `SECURITY_HEADERS` (a same-origin Content Security Policy, no caching).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web

__all__ = [
    "SECURITY_HEADERS",
    "TOKEN_COOKIE",
    "headers_middleware",
    "is_loopback",
    "token_middleware",
]

TOKEN_COOKIE = "crawlq_dashboard_token"

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Headers of every dashboard response."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@web.middleware
async def headers_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Add `SECURITY_HEADERS` to the response."""
    response = await handler(request)
    response.headers.update(SECURITY_HEADERS)
    return response


def token_middleware(token: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    """A middleware that answers 401 to a request without ``token`` (module docstring)."""
    expected = token.encode()

    @web.middleware
    async def check(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        given = ""
        header = request.headers.get("Authorization", "")
        from_query = False
        if header.startswith("Bearer "):
            given = header[len("Bearer ") :]
        elif "token" in request.query:
            given, from_query = request.query["token"], True
        else:
            given = request.cookies.get(TOKEN_COOKIE, "")
        if not hmac.compare_digest(given.encode(), expected):
            return web.Response(status=401, text="401: this dashboard needs its token\n")
        response = await handler(request)
        if from_query:  # the page's own requests then carry it as a cookie
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
        return response

    return check
