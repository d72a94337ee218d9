"""The cookie jar glue: a bounded aiohttp jar per fetcher, and the cookies a redirect carries.

Rules of which cookies go where are RFC 6265's (`crawlq.web.cookies` holds crawlq's own checks).
The jar keeps cookies of IP-address hosts too (for that exact address), sends values as
received, and bounds its memory (`MAX_SET_COOKIE_CHARS`, `MAX_JAR_COOKIES`).
`redirect_cookies` says which cookies a redirect's target gets, since the crawl may queue
the target as a request of its own that another worker fetches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from http.cookies import Morsel, SimpleCookie

import aiohttp
from aiohttp.typedefs import LooseCookies
from yarl import URL

from crawlq.web.cookies import NO_COOKIES, fit_cookies

__all__ = ["MAX_JAR_COOKIES", "MAX_SET_COOKIE_CHARS", "CookieJar", "redirect_cookies"]

logger = logging.getLogger("crawlq.fetch")

_NO_URL = URL()

MAX_JAR_COOKIES = 3000
"""Cookies a worker's jar holds at most (RFC 6265 §6.1: "at least 3000 cookies total"); one
more and it starts over empty (the cookies of hosts a crawl is done with go with it)."""

MAX_SET_COOKIE_CHARS = 8192
"""Longest ``Set-Cookie`` header stored in a jar, in characters; a longer one is ignored (a
cookie's name and value may take 4096 bytes, RFC 6265 §6.1, besides its attributes)."""


class CookieJar(aiohttp.CookieJar):
    """aiohttp's RFC 6265 jar, with its memory bounded (module docstring).

    Built with ``unsafe=True`` (keep cookies of IP-address hosts, for that address only) and
    ``quote_cookie=False`` (send values exactly as the server set them).
    """

    def __init__(self) -> None:
        super().__init__(unsafe=True, quote_cookie=False)

    def update_cookies(self, cookies: LooseCookies, response_url: URL = _NO_URL) -> None:
        """Store ``cookies`` (aiohttp < 3.14 passes a response's cookies here)."""
        items = cookies.items() if isinstance(cookies, Mapping) else cookies
        small = [(n, c) for n, c in items if _set_cookie_chars(n, c) <= MAX_SET_COOKIE_CHARS]
        super().update_cookies(small, response_url)
        self._bound()

    def update_cookies_from_headers(self, headers: Sequence[str], response_url: URL) -> None:
        """Store the cookies of raw ``Set-Cookie`` headers (aiohttp >= 3.14 calls this)."""
        small = [h for h in headers if len(h) <= MAX_SET_COOKIE_CHARS]
        super().update_cookies_from_headers(small, response_url)
        self._bound()

    def _bound(self) -> None:
        if len(self) > MAX_JAR_COOKIES:
            logger.info("cookie jar over %d cookies: starting over empty", MAX_JAR_COOKIES)
            self.clear()


def _set_cookie_chars(name: str, cookie: object) -> int:
    """How long the ``Set-Cookie`` header of a cookie is (or, for a bare value, its pair)."""
    if isinstance(cookie, Morsel):
        return len(cookie.OutputString())
    return len(name) + len(str(cookie)) + 1


def redirect_cookies(
    current: str, sent: Mapping[str, str], resp: aiohttp.ClientResponse, target: str
) -> Mapping[str, str]:
    """The cookies a redirect's target gets: those of its chain that RFC 6265 sends there.

    The cookies sent with ``current`` count as host-only cookies of its host with path
    ``/`` (and ``Secure`` when it is https, so an https -> http hop drops them); the
    response's ``Set-Cookie`` headers update them (RFC 6265 §5.3: a new value replaces an
    old one, ``Max-Age=0`` or a past ``Expires`` deletes it); what is left is filtered for
    ``target`` (§5.4: domain, path, secure) and checked (`crawlq.web.cookies.fit_cookies`).
    A cookie that does not apply to ``target`` is not carried further down the chain
    (a chain that leaves a host and comes back relies on the worker's jar for it).
    """
    set_cookies = resp.cookies
    if not sent and not set_cookies:
        return NO_COOKIES
    here = URL(current, encoded=True)
    jar = aiohttp.CookieJar(unsafe=True, quote_cookie=False)
    if sent:
        own: SimpleCookie = SimpleCookie()
        for name, value in sent.items():
            own[name] = value
            own[name]["path"] = "/"
            own[name]["secure"] = here.scheme == "https"
        jar.update_cookies(own, here)
    jar.update_cookies(set_cookies, resp.url)
    applicable = jar.filter_cookies(URL(target, encoded=True))
    kept, dropped = fit_cookies(_pairs(applicable.items()))
    if dropped:
        logger.debug("%s: %d cookies not carried to %s (form or size)", current, dropped, target)
    return kept


def _pairs(morsels: Iterable[tuple[str, object]]) -> list[tuple[str, str]]:
    return [(name, str(getattr(m, "value", ""))) for name, m in morsels]
