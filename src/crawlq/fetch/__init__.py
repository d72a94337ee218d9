r"""HTTP fetching: one pooled aiohttp session, manual redirects, a body cap, classified errors.

`Fetcher.fetch` either returns a complete `FetchResult` or raises a `FetchError` that is
already classified for the retry policy (`crawlq.rules.retry`): no aiohttp exception escapes.
This is the only package that imports aiohttp (besides `crawlq.testing`). Its modules:
`fetcher` (`Fetcher`: the session and the request loop), `exchange` (one exchange: its
head, its body with the cap, and what a failure means), `redirects`, `jar` (cookies),
`connections` (the guarded resolver, proxies) and `auth` (per-host credentials).

Rules and their sources:

* Redirects (RFC 9110 §15.4) are followed by hand so that each hop can be checked: 301, 302,
  303, 307 and 308 with a ``Location``, resolved against the current URL (RFC 3986 §5).
  303 switches to GET (§15.4.4); so do 301 and 302 after a POST, as browsers do (§15.4.2,
  §15.4.3, WHATWG Fetch "HTTP-redirect fetch"). 307/308 keep the method and body.
  Credentials (``Authorization``, ``Cookie``) are not sent on to another origin. The
  ``Location`` is read from its bytes and resolved as browsers do (WHATWG URL Standard,
  `crawlq.urls.decode_location` and `crawlq.urls.resolve`): ``///host/p`` goes to ``host``,
  a latin-1 ``/caf\xe9`` to ``/caf%E9``.
* Content codings (RFC 9110 §8.4) are undone by `crawlq.web.codings`, not by aiohttp (whose
  ``auto_decompress`` handles one coding only and passes any other list through still
  coded): ``gzip, gzip`` and ``deflate, gzip`` are decoded in reverse order, an unknown
  coding is an error, and ``max_body_bytes`` caps the decoded body as it streams.
* Header values are decoded without loss and without lone surrogates
  (`crawlq.fetch.exchange.joined_headers`): nothing a server puts in a header can fail the
  code that stores or logs it.
* Retryable statuses: 408, 429 and 5xx raise `RetryableStatus` carrying the server's
  ``Retry-After`` (RFC 9110 §10.2.3) in seconds; every other status is returned.
* Time: one budget of ``timeout_s`` covers the whole fetch, redirects included, so a fetch
  never outlives the lease that runs it.
* Cookies (RFC 6265), unless ``cookies=False``: the session keeps a jar (`CookieJar`) for
  the life of the `Fetcher`, one per job in each worker process, and sends its cookies back
  as a browser would, plus the cookies a fetch is given (they win over the jar's). The jar
  keeps cookies of IP-address hosts too (aiohttp's ``unsafe=True``, as browsers do: such a
  cookie goes back to that exact address only), sends values as received
  (``quote_cookie=False``), and bounds its memory: a ``Set-Cookie`` over
  `MAX_SET_COOKIE_CHARS` is ignored, and past `MAX_JAR_COOKIES` cookies the jar starts over
  empty. A redirect not followed returns, in ``FetchResult.location_cookies``, the cookies
  its target must get (`crawlq.fetch.jar.redirect_cookies`), since the crawl queues the
  target as a request of its own that another worker may fetch. A followed redirect
  carries them the same way.
* Private addresses (`crawlq.web.addresses`): the connector's resolver is wrapped by
  `GuardedResolver`, which drops every address the `AddressGuard` refuses, so a connection
  can only go to an allowed address (a DNS answer that changes between two lookups, "DNS
  rebinding", gains nothing). aiohttp skips the resolver for IP-literal hosts
  (``TCPConnector._resolve_host``), so `Fetcher` judges those itself before each request.
  Every request goes through both: the URL's own, robots.txt, every redirect hop.
"""

from __future__ import annotations

from crawlq.fetch.connections import AddressRefused, GuardedResolver
from crawlq.fetch.fetcher import Fetcher
from crawlq.fetch.jar import MAX_JAR_COOKIES, MAX_SET_COOKIE_CHARS, CookieJar
from crawlq.fetch.redirects import REDIRECT_STATUSES, RedirectGuard, redirected_method

__all__ = [
    "MAX_JAR_COOKIES",
    "MAX_SET_COOKIE_CHARS",
    "REDIRECT_STATUSES",
    "AddressRefused",
    "CookieJar",
    "Fetcher",
    "GuardedResolver",
    "RedirectGuard",
    "redirected_method",
]
