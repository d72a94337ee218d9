"""Redirects and meta refreshes: the redirecting page is stored, its target queued as a hop.

A redirect is not followed inside a fetch: a 3xx is stored as a page of its own (its status,
``final_url`` = the target) and the target is queued as a request of its own, with the
original's priority, depth, callback and meta (``meta["redirect_urls"]`` lists the chain,
``meta["redirect_times"]`` counts it against ``max_redirects``). So every hop passes the same
gate as any request: the URL rules and scope (`crawlq.rules.scope.Scope.admit`), dedup (a hop to a
URL already seen is not fetched again), robots.txt, the private-address guard and its host's
politeness slot. Scrapy's redirect middleware schedules hops the same way. An HTML page
with a ``<meta http-equiv="refresh">`` to another URL (``meta_refresh``; a delay of at most
``meta_refresh_max_delay_s``) is a hop too, a GET: the page is stored with its title,
``final_url`` = the target, and goes to no callback, as Scrapy's meta refresh middleware
does.

Cookies travel with the hop: its ``cookies`` are the ones the fetcher says its target gets
(`crawlq.request.FetchResult.location_cookies`: the request's own and those the redirect
set, where RFC 6265 sends them), so whichever worker fetches the hop sends them.

A 3xx back into its own chain (`comeback`: the target's canonical URL is one the chain
fetched, `crawlq.urls.url_keys`) is a ``revisit``, whose fingerprint is its own
(`crawlq.web.cookies.revisit_fingerprint`), so dedup does not drop it:

- once per URL of the chain: ``/p`` -> ``302 Location: /p#top``, or ``/p?a=1&b=2`` ->
  ``/p?b=2&a=1`` (the same canonical URL, the server's own spelling), is fetched again;
- and each time the redirect sets a cookie the redirected request did not send: a cookie
  wall (``GET /p`` -> ``302 Set-Cookie: ok=1; Location: /p``) is fetched again with the
  cookie (Scrapy's issue #1225), and a wall that sets a new value every time ends at
  ``max_redirects`` (``too_many_redirects``, the detail naming the cookies).

A 3xx back to a URL the chain fetched twice already, with no new cookie, is a dead letter
``redirect_loop`` (its detail the chain), counted as any dead letter: a server that
redirects a page to itself forever costs two requests and is never lost silently. A
revisit's record replaces the redirect's (both have the URL's ``record_fingerprint``): one
record per URL, the last response. A meta refresh back into its chain is a revisit only
with a new cookie; otherwise it is deduplicated as any link, since its page is stored with
its title and nothing is lost.

A redirect that is not followed (out of scope, or a ``Location`` that is no URL) is stored
with ``final_url`` = the URL fetched, the last one actually requested, and the error
``redirect_not_followed: <Location>`` or ``redirect_invalid: <why>``; a followed one with
``final_url`` = its target as queued.

A hop keeps its request's ``headers`` (they hold no credentials or cookies:
`crawlq.web.headers`), ``errback`` and ``dont_filter``, except that a 301/302/303 which turns a
POST into a GET drops the body and its content headers (``Content-Type``,
``Content-Length``, ``Content-Encoding``, ``Content-Language``, ``Content-Location``; RFC
9110 §15.4.2-4, `crawlq.web.headers.without_content_headers`), while a 307/308 keeps method, body
and headers; the hop of a ``dont_filter`` request gets
the fingerprint of its redirect as its ``visit`` key, so it too bypasses dedup, once per
redirect (a loop still ends at ``max_redirects``).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from crawlq.engine.deps import Deps
from crawlq.engine.outcome import Kind, Outcome, dead_outcome, not_followed, page_record
from crawlq.errors import InvalidURL
from crawlq.fetch import redirected_method
from crawlq.request import CrawlRequest, FetchResult, Lease
from crawlq.urls import url_keys
from crawlq.web.headers import without_content_headers

if TYPE_CHECKING:
    from crawlq.engine.parse import ParsedPage

__all__ = ["Comeback", "comeback", "hop", "redirected"]


class Comeback(enum.Enum):
    """What a redirect to a URL does, given its chain (`comeback`; module docstring)."""

    HOP = "hop"
    """A URL the chain has not fetched: a plain hop, deduplicated as any request."""
    REVISIT = "revisit"
    """Back into the chain, to be fetched again: a ``revisit`` request."""
    LOOP = "loop"
    """Back to a URL fetched twice already, nothing new: a ``redirect_loop`` dead letter."""


async def redirected(lease: Lease, result: FetchResult, location: str, deps: Deps) -> Outcome:
    """Store the redirect as a page of its own and queue its target (module docstring)."""
    method, keep_body = redirected_method(result.status, lease.request.method)
    return await hop(lease, result, location, method, keep_body, deps)


async def hop(
    lease: Lease,
    result: FetchResult,
    location: str,
    method: str,
    keep_body: bool,
    deps: Deps,
    page: ParsedPage | None = None,
) -> Outcome:
    """Store a redirecting page and queue its target as a hop (3xx, or ``page``'s refresh)."""
    req = lease.request
    chain = req.meta.get("redirect_urls")
    chain = list(chain) if isinstance(chain, list) else []
    hops = len(chain) + 1
    if hops > deps.settings.max_redirects:
        return dead_outcome(
            lease, "too_many_redirects", _too_many(req, chain, result, location, deps)
        )
    skipped: Counter[str] = Counter()
    links: list[CrawlRequest] = []
    error: str | None = None
    cookies = result.location_cookies
    back = comeback(location, [*chain, req.url], cookies, req.cookies)
    if back is Comeback.LOOP and page is None:
        path = " -> ".join([*(u for u in chain if isinstance(u, str)), req.url, location])
        return dead_outcome(lease, "redirect_loop", f"back to a URL fetched twice: {path}")
    revisit = back is Comeback.REVISIT and (page is None or _sets_cookie(cookies, req.cookies))
    try:
        target: CrawlRequest | None = CrawlRequest(
            location,
            method=method,
            body=req.body if keep_body else b"",
            priority=req.priority,
            depth=req.depth,
            callback=req.callback,
            cb_kwargs=req.cb_kwargs,
            meta={**req.meta, "redirect_urls": [*chain, req.url], "redirect_times": hops},
            cookies=cookies,
            revisit=revisit,
            referrer=req.url,
            headers=req.headers if keep_body else without_content_headers(req.headers),
            errback=req.errback,
            dont_filter=req.dont_filter,
            visit=_hop_visit(req, revisit),
        )
    except (InvalidURL, ValueError) as exc:
        target, error = None, f"redirect_invalid: {exc}"
    if target is not None:
        target, reason = deps.scope.admit(target)
        if reason is None:
            links.append(target)
        else:
            skipped[reason] += 1
            error = not_followed(location)
    # a followed hop: its target as queued (URL rules applied); else the URL last fetched
    final_url = result.final_url if error is not None or target is None else target.url
    record = await page_record(
        lease,
        result,
        deps,
        final_url=final_url,
        title=None if page is None else page.title,
        error=error if page is None or error is not None else page.error,
        canonical_url=None if page is None else page.canonical_url,
    )
    return Outcome(lease, Kind.PAGE, page=record, links=links, skipped=skipped)


def _hop_visit(req: CrawlRequest, revisit: bool) -> str:
    """The ``visit`` key of the hop of ``req`` (``""`` unless ``req`` is ``dont_filter``).

    A revisit keeps ``req``'s own, so its record replaces the redirect's (one record of a
    cookie wall), while its fingerprint still differs by its cookies; any other hop gets the
    redirect's fingerprint (it bypasses dedup once per redirect).
    """
    if not req.dont_filter:
        return ""
    return req.visit if revisit else req.fingerprint.hex()


def _too_many(
    req: CrawlRequest, chain: list[object], result: FetchResult, location: str, deps: Deps
) -> str:
    """The detail of a ``too_many_redirects`` dead letter: the limit and the chain.

    A chain that comes back to its own URLs setting cookies on the way is a cookie wall that
    never let the crawler through: the detail says so and names the cookies (never their
    values: they may be session secrets).
    """
    urls = [u for u in chain if isinstance(u, str)] + [req.url, location]
    limit = deps.settings.max_redirects
    path = " -> ".join(urls)
    cookies = sorted(set(result.location_cookies) | set(req.cookies))
    if cookies and (req.revisit or _revisits(location, [*chain, req.url])):
        names = ", ".join(cookies)
        return (
            f"cookie wall: more than {limit} redirects back to the same URL, each setting a "
            f"cookie ({names}) that did not let the crawler through: {path}"
        )
    return f"more than {limit} redirects: {path}"


def comeback(
    location: str,
    chain: list[object],
    cookies: Mapping[str, str],
    sent: Mapping[str, str],
) -> Comeback:
    """Whether a 3xx to ``location`` is a hop, a revisit or a loop (module docstring).

    The rule: a target whose canonical URL (`crawlq.urls.url_keys`) the chain has not
    fetched is a `Comeback.HOP`. One the chain fetched is a `Comeback.REVISIT` when the
    chain fetched it once, or when the redirect sets a cookie the redirected request did
    not send (``cookies`` has a name or value ``sent`` lacks: a cookie wall); else a
    `Comeback.LOOP`.

    Args:
        location: The redirect's target, an absolute URL.
        chain: The chain's URLs so far, the redirected request's last. It comes from
            ``meta``, which an inbox entry may fill with anything: what is not a URL is
            skipped.
        cookies: The cookies the target gets (`crawlq.request.FetchResult.location_cookies`).
        sent: The cookies the redirected request sent (its ``cookies``).

    Returns:
        `Comeback.HOP`, `Comeback.REVISIT` or `Comeback.LOOP`; HOP for a ``location`` that
        is not a URL (the caller refuses it).
    """
    try:
        target = url_keys(location).canonical
    except InvalidURL:
        return Comeback.HOP
    fetched = 0
    for url in chain:
        try:
            if isinstance(url, str) and url_keys(url).canonical == target:
                fetched += 1
        except InvalidURL:
            continue
    if fetched == 0:
        return Comeback.HOP
    if fetched == 1 or _sets_cookie(cookies, sent):
        return Comeback.REVISIT
    return Comeback.LOOP


def _sets_cookie(cookies: Mapping[str, str], sent: Mapping[str, str]) -> bool:
    """Whether ``cookies`` has a cookie (name and value) that ``sent`` does not."""
    return any(sent.get(name) != value for name, value in cookies.items())


def _revisits(location: str, chain: list[object]) -> bool:
    """Whether a redirect to ``location`` comes back to a URL of ``chain`` (`comeback`)."""
    return comeback(location, chain, {}, {}) is not Comeback.HOP
