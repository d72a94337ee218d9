"""One leased URL through the pipeline: robots.txt, fetch, parse, and the decision.

`process` is what both engines share. It returns an `Outcome` that the caller writes in
batches: the store first, then the discovered links, then the lease is settled, so a crash at
any point re-delivers the URL instead of losing it. Its only frontier writes are host
politeness (`crawlq.rules.politeness`): a 429/503 or a connection failure pauses the host for every
worker at once (`Frontier.host_strike`), and a robots.txt ``Crawl-delay`` raises the host's
delay (`Frontier.set_host_policy`).

The fetch through the downloader middlewares is here (`download`, below); the other steps
have modules of their own: the outcome, its page record and the batch's records
(`crawlq.engine.outcome`), what a step needs (`crawlq.engine.deps`), host and proxy feedback
and the fate of a failed fetch (`crawlq.engine.fetch_feedback`), redirects and meta
refreshes, which are queued as hops and never followed inside a fetch
(`crawlq.engine.redirects`), the parse step and the spider's callback
(`crawlq.engine.parse`).

Sitemaps (`crawlq.sitemap`) are requests too, marked by their callback: fetched through the
same gate, with the protocol's 50 MB cap instead of ``max_body_bytes`` (the fetcher reads at
most one byte more, and the parser says ``sitemap_too_large`` when it got it). Their page
record is stored like any (``error`` names a sitemap problem), and the URLs they list are the
outcome's links (a sitemap index's: sitemap requests), through scope like any link, without
the ``max_links_per_page`` cap (the protocol's 50,000 applies). With ``follow_sitemaps``, the
``Sitemap:`` lines of a robots.txt ride on the outcome of the request whose check loaded the
file into this process (a RELEASE or a FILTERED one): the engines push them like links.

**The fetch, through the downloader middlewares** (`download`), with the engine's policy kept
outside them. `download` is what `process` calls for a lease whose robots.txt check passed.
Without downloader middlewares it is the fetch. With them (`crawlq.middleware`):

* ``process_request`` runs before the fetch. A request it returns for the **same URL**
  (normalised) replaces the request sent (its method, body, headers and cookies); the
  fetch is then exactly a crawl's (the private-address guard in the resolver, the size
  caps, the politeness slot of this lease). A request for **another URL** is not fetched
  here: it becomes this outcome's link, through the job's scope (the same depth and
  referrer as a redirect hop), so the frontier dedups it and a later lease checks its
  robots.txt and the guard; this URL ends as a filtered record ``middleware_request``. A
  response it returns is the page, and nothing is sent.
* ``process_response`` gets each response (one that ``process_request`` returned too),
  redirects included (a crawl's redirects are hops, `crawlq.engine.redirects`). A request
  for the same URL is a **retry**: this lease's request goes back to the frontier through
  the retry policy (`crawlq.rules.retry.decide`, reason ``middleware_retry``), counted and backed
  off, dead-lettered after ``max_retries``; a middleware that wants other headers on the
  retry sets them in ``process_request``, which runs again. Another URL: as above.
* ``process_exception`` gets a failed fetch's `crawlq.errors.FetchError` (a timeout, a
  5xx, a body over the cap), never a refusal of the policy (robots.txt, the guard) nor a
  proxy's failure (the engine benches the proxy and sends the URL again,
  `crawlq.rules.proxies`). None leaves it to the retry policy as without middlewares.
* `crawlq.errors.Retry` raised by any hook is a transient failure with the given reason.

A hook that raises anything else, or returns a value of another type, dead-letters the URL
as ``middleware_error`` naming the hook, logged with its traceback: user code, as a
callback's spider error, but a fetch that did not happen has no page to store.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from crawlq.engine.deps import Deps
from crawlq.engine.fetch_feedback import (
    apply_crawl_delay,
    failed_fetch,
    proxies_benched,
    proxy_failed,
    proxy_succeeded,
    refresh_bench,
    throttle,
)
from crawlq.engine.outcome import Kind, Outcome, dead_outcome, page_record, status_error
from crawlq.engine.pagework import PageTimeout
from crawlq.engine.parse import dead_errback, parse_response
from crawlq.engine.redirects import hop, redirected
from crawlq.errors import FetchError, ProxiesBenched, ProxyFailed, Retry, RobotsUnreachable
from crawlq.records import FilteredRecord
from crawlq.request import CrawlRequest, FetchResult, Lease
from crawlq.robots import RobotsVerdict
from crawlq.rules.politeness import HOST_UNREACHABLE
from crawlq.rules.scope import FilterReason
from crawlq.settings import Settings
from crawlq.sitemap import MAX_BYTES, is_sitemap, read_sitemap, robots_sitemaps
from crawlq.web.headers import referer

__all__ = ["MIDDLEWARE_ERROR", "MIDDLEWARE_REQUEST", "MIDDLEWARE_RETRY", "download", "process"]

logger = logging.getLogger(__name__)


EXTRA_DELIVERIES = 5
"""Deliveries beyond ``1 + max_retries`` after which a URL whose lease keeps expiring (its
worker is killed or stalls on it every time) is dead-lettered as ``lease_expired``."""


async def process(lease: Lease, deps: Deps) -> Outcome:
    """Take one lease through robots.txt, fetch and parse, and decide its outcome.

    Never raises for a failure of the URL itself (those become RETRY or DEAD outcomes); only
    the frontier's errors (`crawlq.errors.FrontierUnavailable`) and cancellation propagate.
    When robots.txt had to be fetched first, the page is not fetched under the same lease: the
    outcome is RELEASE, and the caller gives the lease back without counting an attempt.
    A DEAD outcome of a request with an ``errback`` carries what the errback yielded
    (`crawlq.engine.parse.dead_errback`).
    """
    outcome = await _process(lease, deps)
    if outcome.kind is Kind.DEAD and lease.request.errback:
        await dead_errback(outcome, deps)
    return outcome


def request_headers(req: CrawlRequest, settings: Settings) -> dict[str, str]:
    """The headers a fetch of ``req`` adds to the fetcher's (the job's ``default_headers``).

    The request's own, and a ``Referer`` made from its ``referrer`` under the job's
    ``referer_policy`` (`crawlq.web.headers.referer`), unless the request sets one itself.
    """
    headers = dict(req.headers)
    if req.referrer is not None and not any(k.lower() == "referer" for k in headers):
        value = referer(req.referrer, req.url, settings.referer_policy)
        if value is not None:
            headers["Referer"] = value
    return headers


async def _process(lease: Lease, deps: Deps) -> Outcome:  # noqa: C901  (the shared pipeline, one step per stage)
    """`process` without the errback of a dead letter."""
    req = lease.request
    settings = deps.settings
    if lease.host_down:
        detail = f"{req.host} stopped answering: its circuit breaker gave up on it"
        return dead_outcome(lease, HOST_UNREACHABLE, detail)
    if lease.attempt > 1 + settings.max_retries + EXTRA_DELIVERIES:
        return dead_outcome(
            lease, "lease_expired", f"delivered {lease.attempt - 1} times, never settled"
        )
    try:
        proxied = deps.fetcher.proxies.active
        if proxied:
            await refresh_bench(deps)
        via = None  # no proxies: no bench to read, no route to choose, nothing to report
        if proxied or "proxy" in req.meta:  # meta naming a proxy this process lacks fails
            via = deps.fetcher.route(req.url, req.meta)  # robots.txt: the pool's choice
        if deps.robots is not None:
            robots = await deps.robots.check(req.url)
            if not robots.allowed:
                outcome = Outcome(
                    lease,
                    Kind.FILTERED,
                    filtered=FilteredRecord(
                        req.record_fingerprint,
                        req.url,
                        FilterReason.ROBOTS_TXT,
                        req.depth,
                        time.time(),
                    ),
                    reason=FilterReason.ROBOTS_TXT,
                )
                return _with_robots_sitemaps(outcome, robots, deps)
            if robots.fetched:  # this lease's politeness slot went to robots.txt
                await apply_crawl_delay(req.host, deps)
                outcome = Outcome(lease, Kind.RELEASE, reason="robots_txt_fetched")
                return _with_robots_sitemaps(outcome, robots, deps)
            if robots.loaded:
                # This lease waited for robots.txt (another worker's fetch, or the shared
                # copy): sending now would start the request late in its politeness slot,
                # closer than the delay to the next one, and the lease may predate the
                # host's Crawl-delay. Lease it again: once per host per process and TTL.
                outcome = Outcome(lease, Kind.RELEASE, reason="robots_txt_loaded")
                return _with_robots_sitemaps(outcome, robots, deps)
        sitemap = is_sitemap(req)

        async def send(sent: CrawlRequest) -> FetchResult:
            fetched = await deps.fetcher.fetch(
                sent.url,
                method=sent.method,
                body=sent.body,
                headers=request_headers(sent, settings),
                cookies=sent.cookies,
                follow_redirects=False,
                truncate_body_bytes=MAX_BYTES + 1 if sitemap else None,
                proxy=via,
            )
            if via is not None:
                await proxy_succeeded(via, deps)
            return fetched

        if deps.middlewares.downloader:
            got = await download(lease, send, deps)  # through the downloader middlewares
            if isinstance(got, Outcome):
                return got
            result = got
        else:
            result = await send(req)
    except ProxyFailed as exc:
        return await proxy_failed(lease, exc, deps)
    except ProxiesBenched as exc:
        return await proxies_benched(lease, exc, deps)
    except RobotsUnreachable as exc:
        if exc.requested:
            return await failed_fetch(lease, exc, deps)  # a strike: the host pauses
        # A failure remembered from another page's request: no request was sent for this
        # page, so it spends no attempt; it waits for the host's pause, as queued pages do.
        return Outcome(lease, Kind.RELEASE, reason="robots_unreachable_remembered")
    except FetchError as exc:
        if exc.reason == FilterReason.PRIVATE_ADDRESS:
            return _private_address(lease, exc)
        return await failed_fetch(lease, exc, deps)
    if logger.isEnabledFor(logging.INFO):  # the fetch line: one shape, also as JSON fields
        fields = {
            "method": req.method,
            "url": req.url,
            "status": result.status,
            "bytes": len(result.body),
            "seconds": round(result.elapsed_s, 3),
            "attempt": lease.attempt,
        }
        logger.info("%s %s %d %dB %.3fs attempt=%d", *fields.values(), extra={"crawlq": fields})
    if deps.throttle is not None:
        await throttle(req.host, result, deps.throttle, deps)
    if result.location is not None:
        return await redirected(lease, result, result.location, deps)
    if sitemap:
        return await _sitemap(lease, result, deps)
    return await _parse(lease, result, deps)


def _with_robots_sitemaps(outcome: Outcome, robots: RobotsVerdict, deps: Deps) -> Outcome:
    """Add the ``Sitemap:`` lines of a robots.txt this lease loaded (``follow_sitemaps``)."""
    if deps.settings.follow_sitemaps and robots.sitemaps:
        req = outcome.lease.request
        outcome.links, outcome.skipped = robots_sitemaps(
            robots.sitemaps, req, deps.scope, deps.sitemap_rules
        )
        logger.info(
            "%s: robots.txt names %d sitemaps, %d in scope",
            req.host,
            len(robots.sitemaps),
            len(outcome.links),
        )
    return outcome


async def _sitemap(lease: Lease, result: FetchResult, deps: Deps) -> Outcome:
    """Store the sitemap's page and queue what it lists (`crawlq.sitemap.read_sitemap`)."""
    req = lease.request
    if not 200 <= result.status < 300:
        record = await page_record(
            lease, result, deps, final_url=result.final_url, title=None, error=status_error(result)
        )
        return Outcome(lease, Kind.PAGE, page=record)
    work = functools.partial(read_sitemap, req, result.body, deps.scope, deps.sitemap_rules)
    try:
        listed = await deps.pages.run(work, deps.settings.parse_timeout_s)
    except PageTimeout:
        logger.warning("%s: reading the sitemap ran past parse_timeout_s", req.url)
        error = f"parse_timeout: reading the sitemap ran past {deps.settings.parse_timeout_s:g}s"
        record = await page_record(
            lease, result, deps, final_url=result.final_url, title=None, error=error
        )
        return Outcome(lease, Kind.PAGE, page=record)
    sitemap = listed.sitemap
    logger.info(
        "sitemap %s (%s): %d entries, %d queued%s",
        req.url,
        sitemap.kind or "unknown",
        sitemap.found,
        len(listed.requests),
        f"; {sitemap.error}" if sitemap.error else "",
    )
    record = await page_record(
        lease, result, deps, final_url=result.final_url, title=None, error=sitemap.error
    )
    return Outcome(lease, Kind.PAGE, page=record, links=listed.requests, skipped=listed.skipped)


async def _parse(lease: Lease, result: FetchResult, deps: Deps) -> Outcome:
    """Parse the page and run the spider on the page thread (`crawlq.engine.pagework`).

    A body labelled HTML whose bytes are binary (`crawlq.web.decode.sniff`: a PDF, PNG or ZIP
    signature, a high share of binary data bytes; a stray NUL is not) is not parsed: no
    title, no links; it is stored with the error ``binary_body: <why>``, and its callback
    sees it as any binary response (empty text).
    """
    req = lease.request
    page = await parse_response(
        req,
        result,
        deps.spider,
        deps.scope,
        deps.settings,
        deps.pages,
        deps.link_rules,
        deps.middlewares,
        items=deps.items,
    )
    if page.refresh_url is not None:  # a meta refresh: a redirect, no callback
        return await hop(lease, result, page.refresh_url, "GET", False, deps, page)
    record = await page_record(
        lease,
        result,
        deps,
        final_url=result.final_url,
        title=page.title,
        error=page.error,
        canonical_url=page.canonical_url,
    )
    return Outcome(
        lease,
        Kind.PAGE,
        page=record,
        items=page.items,
        links=page.links,
        skipped=page.skipped,
        dropped=page.dropped,
    )


PRIVATE_WARNED_MAX = 1024
"""Most hosts whose private-address refusal this process remembers having warned about."""

_private_warned: set[str] = set()


def _private_address(lease: Lease, exc: FetchError) -> Outcome:
    """The FILTERED outcome of a request the private-address guard refused (never retried).

    The first refusal of each host in this process is a WARNING naming the flag that allows
    it (both engines); the others are INFO lines.
    """
    req = lease.request
    if req.host not in _private_warned:
        if len(_private_warned) >= PRIVATE_WARNED_MAX:
            _private_warned.clear()
        _private_warned.add(req.host)
        logger.warning(
            "filtered %s as private_address: %s; its host is not a seed host of the job, and "
            "private addresses are refused unless the job allows them: --allow-private "
            "(CRAWLQ_ALLOW_PRIVATE=1) when the job is seeded (one line per host)",
            req.url,
            exc.detail,
        )
    else:
        logger.info("filtered %s: %s", req.url, exc.detail)
    reason = FilterReason.PRIVATE_ADDRESS
    record = FilteredRecord(req.record_fingerprint, req.url, reason, req.depth, time.time())
    return Outcome(lease, Kind.FILTERED, filtered=record, reason=reason)


MIDDLEWARE_REQUEST = "middleware_request"
"""Filter reason of a URL whose middleware replaced it by a request for another URL."""
MIDDLEWARE_RETRY = "middleware_retry"
"""Retry (and dead-letter) reason of a URL whose ``process_response`` returned its request."""
MIDDLEWARE_ERROR = "middleware_error"
"""Dead-letter reason of a URL whose middleware raised (or returned a wrong value)."""

Send = Callable[[CrawlRequest], Awaitable[FetchResult]]
T = TypeVar("T")


class _HookFailed(Exception):
    """A middleware hook raised (not `Retry`) or returned a wrong value."""


async def download(lease: Lease, send: Send, deps: Deps) -> FetchResult | Outcome:
    """Fetch ``lease``'s request with ``send`` through the middlewares (module docstring).

    Returns:
        The response, or the outcome that ends the lease here (a retry, a dead letter, a
        filtered record with the other URL's request as its link).

    Raises:
        FetchError: The fetch failed and no middleware handled it (the caller's policy:
            retry, dead letter, or the guard's filtered record).
    """
    mw = deps.middlewares
    if not mw.downloader:
        return await send(lease.request)
    try:
        return await _download(lease, send, deps)
    except Retry as exc:
        exc.url = lease.request.url
        return await failed_fetch(lease, exc, deps)
    except _HookFailed as exc:
        cause = exc.__cause__ or exc
        logger.error("%s: middleware error: %s", lease.request.url, exc, exc_info=cause)
        return dead_outcome(lease, MIDDLEWARE_ERROR, str(exc))


async def _download(lease: Lease, send: Send, deps: Deps) -> FetchResult | Outcome:
    req = lease.request
    mw = deps.middlewares
    got = await _hook(mw.process_request(req), "process_request")
    if isinstance(got, CrawlRequest):
        if got.url != req.url:
            return _elsewhere(lease, got, "process_request", deps)
        req = got
    if isinstance(got, FetchResult):
        result = got
    else:
        try:
            result = await send(req)
        except (RobotsUnreachable, Retry, ProxyFailed, ProxiesBenched):
            raise  # policy: robots.txt waits, proxies are benched and swapped by the engine
        except FetchError as exc:
            if exc.reason == FilterReason.PRIVATE_ADDRESS:
                raise  # the guard's refusal is policy, not a failure to handle
            handled = await _hook(mw.process_exception(req, exc), "process_exception")
            if handled is None:
                raise
            if isinstance(handled, CrawlRequest):
                return await _again(lease, handled, "process_exception", deps)
            result = handled
    answer = await _hook(mw.process_response(req, result), "process_response")
    if isinstance(answer, CrawlRequest):
        return await _again(lease, answer, "process_response", deps)
    return answer


async def _hook(call: Awaitable[T], name: str) -> T:
    """Await a hook chain: `Retry` passes, any other exception is a `_HookFailed`."""
    try:
        return await call
    except (Retry, FetchError):
        raise
    except Exception as exc:
        raise _HookFailed(f"{name}: {type(exc).__name__}: {exc}") from exc


async def _again(lease: Lease, request: CrawlRequest, hook: str, deps: Deps) -> Outcome:
    """A request returned after the fetch: a retry for the same URL, else queued."""
    if request.url != lease.request.url:
        return _elsewhere(lease, request, hook, deps)
    detail = f"{hook} asked for the request again"
    return await failed_fetch(lease, Retry(MIDDLEWARE_RETRY, detail, url=request.url), deps)


def _elsewhere(lease: Lease, request: CrawlRequest, hook: str, deps: Deps) -> Outcome:
    """This URL filtered as ``middleware_request``; ``request`` queued through scope."""
    req = lease.request
    child = dataclasses.replace(request, referrer=req.url, depth=req.depth)
    admitted, reason = deps.scope.admit(child)
    outcome = Outcome(
        lease,
        Kind.FILTERED,
        filtered=FilteredRecord(
            req.record_fingerprint, req.url, MIDDLEWARE_REQUEST, req.depth, time.time()
        ),
        reason=MIDDLEWARE_REQUEST,
    )
    if reason is None:
        outcome.links.append(admitted)
    else:
        outcome.skipped[reason] += 1
    logger.info("%s: %s returned %s instead (%s)", req.url, hook, request.url, reason or "queued")
    return outcome
