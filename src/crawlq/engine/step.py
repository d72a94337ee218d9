"""One leased URL through the pipeline: robots.txt, fetch, parse, and the decision.

`process` is what both engines share. It returns an `Outcome` that the caller writes in
batches: the store first, then the discovered links, then the lease is settled, so a crash at
any point re-delivers the URL instead of losing it. Its only frontier writes are host
politeness (`crawlq.politeness`): a 429/503 or a connection failure pauses the host for every
worker at once (`Frontier.host_strike`), and a robots.txt ``Crawl-delay`` raises the host's
delay (`Frontier.set_host_policy`).

Redirects are not followed inside a fetch: a 3xx is stored as a page of its own (its status,
``final_url`` = the target) and the target is queued as a request of its own, with the
original's priority, depth, callback and meta (``meta["redirect_urls"]`` lists the chain,
``meta["redirect_times"]`` counts it against ``max_redirects``). So every hop passes the same
gate as any request: the URL rules and scope (`crawlq.scope.Scope.admit`), dedup (a hop to a
URL already seen is not fetched again), robots.txt, the private-address guard and its host's
politeness slot. Scrapy's redirect middleware schedules hops the same way. An HTML page
with a ``<meta http-equiv="refresh">`` to another URL (``meta_refresh``; a delay of at most
``meta_refresh_max_delay_s``) is a hop too, a GET: the page is stored with its title,
``final_url`` = the target, and goes to no callback, as Scrapy's meta refresh middleware
does.

Cookies travel with the hop: its ``cookies`` are the ones the fetcher says its target gets
(`crawlq.request.FetchResult.location_cookies`: the request's own and those the redirect
set, where RFC 6265 sends them), so whichever worker fetches the hop sends them. A hop back
to a URL of its own chain is a ``revisit`` (`_revisits`): its fingerprint covers its cookies,
so a cookie wall (``GET /p`` -> ``302 Set-Cookie: ok=1; Location: /p``) is fetched again
with the cookie instead of being dropped as already seen (Scrapy's issue #1225), while a hop
that brings no new cookie is deduplicated as before and a redirect loop still ends. Its
record replaces the redirect's (both have the URL's ``record_fingerprint``): one record per
URL, the last response.

Sitemaps (`crawlq.sitemap`) are requests too, marked by their callback: fetched through the
same gate, with the protocol's 50 MB cap instead of ``max_body_bytes`` (the fetcher reads at
most one byte more, and the parser says ``sitemap_too_large`` when it got it). Their page
record is stored like any (``error`` names a sitemap problem), and the URLs they list are the
outcome's links (a sitemap index's: sitemap requests), through scope like any link, without
the ``max_links_per_page`` cap (the protocol's 50,000 applies). With ``follow_sitemaps``, the
``Sitemap:`` lines of a robots.txt ride on the outcome of the request whose check loaded the
file into this process (a RELEASE or a FILTERED one): the engines push them like links.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from crawlq.engine.pagework import PageTimeout, PageWork
from crawlq.errors import (
    FetchError,
    InvalidURL,
    RetryableStatus,
    RobotsUnreachable,
    StoreError,
)
from crawlq.fetch import Fetcher, redirected_method
from crawlq.frontier import Frontier
from crawlq.links import (
    DEPTH_CHECK_MIN_TAGS,
    LinkRules,
    Refresh,
    extract_title,
    parse_html,
    scan_page,
    screen_html,
)
from crawlq.politeness import HOST_UNREACHABLE, AutoThrottle, Politeness, strike_of
from crawlq.records import (
    UNSERIALISABLE_ITEM,
    DeadRecord,
    FilteredRecord,
    ItemRecord,
    PageRecord,
    spider_error,
    spider_error_type,
)
from crawlq.request import CrawlRequest, FetchResult, Lease
from crawlq.retry import decide
from crawlq.robots import RobotsCache, RobotsVerdict
from crawlq.scope import FilterReason, Scope
from crawlq.settings import Settings
from crawlq.sitemap import MAX_BYTES, SitemapRules, is_sitemap, read_sitemap, robots_sitemaps
from crawlq.spider import (
    CallbackRun,
    Response,
    Spider,
    SpiderError,
    sitemap_rules_of,
    start_callback,
)
from crawlq.store import ResultBatch
from crawlq.urls import url_keys

if TYPE_CHECKING:
    from crawlq.store.warc import WarcLocation, WarcWriter

__all__ = ["Deps", "Kind", "Outcome", "parse_response", "process", "result_batch"]

logger = logging.getLogger(__name__)


INLINE_MAX_TAGS = DEPTH_CHECK_MIN_TAGS
"""A page with at most this many ``<`` is parsed on the event loop when no user code runs on it
(no callback, or the base `Spider.parse`): however it nests, lexbor takes at most ~15 ms on it
(the time grows with the square of the depth, and the depth is below the count of ``<``), less
than the page thread's hand-off costs in all. Any other page, and every user callback, runs on
the worker's page thread (`crawlq.engine.pagework`)."""

EXTRA_DELIVERIES = 5
"""Deliveries beyond ``1 + max_retries`` after which a URL whose lease keeps expiring (its
worker is killed or stalls on it every time) is dead-lettered as ``lease_expired``."""


class Kind(StrEnum):
    """How a leased URL ended."""

    PAGE = "page"
    RETRY = "retry"
    DEAD = "dead"
    FILTERED = "filtered"
    RELEASE = "release"
    """robots.txt was fetched under this lease: give the lease back, so that the page's own
    request waits for the host's next politeness slot (invariant 3 counts every request)."""


@dataclass(slots=True)
class Outcome:
    """The result of `process` for one lease; the caller writes it.

    Attributes:
        lease: The lease processed.
        kind: How it ended.
        page: The page record (kind PAGE).
        items: Items the spider yielded for the page.
        links: In-scope requests discovered (to push; also on a RELEASE or FILTERED outcome:
            the sitemaps of a robots.txt this lease loaded).
        dead: The dead-letter record (kind DEAD).
        filtered: The filtered record (kind FILTERED).
        retry_delay_s: Seconds before the retry (kind RETRY).
        reason: Short code of a retry, dead letter or filter.
        skipped: Discovered links not followed, by scope reason.
    """

    lease: Lease
    kind: Kind
    page: PageRecord | None = None
    items: list[ItemRecord] = field(default_factory=list)
    links: list[CrawlRequest] = field(default_factory=list)
    dead: DeadRecord | None = None
    filtered: FilteredRecord | None = None
    retry_delay_s: float = 0.0
    reason: str = ""
    skipped: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class Deps:
    """What `process` needs, built once per worker.

    Attributes:
        settings: The crawl settings.
        fetcher: The HTTP client.
        robots: robots.txt cache, or None when robots.txt is ignored.
        spider: The user's spider instance.
        scope: Which discovered links to follow.
        frontier: Where host politeness is written (pauses, Crawl-delay).
        politeness: The job's host politeness rules.
        warc: Where each fetched page's request and response are archived, or None.
        throttle: This worker's AutoThrottle state, when the job turns it on.
        pages: The worker's page thread: parsing and spider callbacks run there, off the
            event loop, each with a ``parse_timeout_s`` budget.
        sitemap_rules: The spider's ``sitemap_rules`` and ``sitemap_follow``, compiled from
            ``spider`` (raises `crawlq.errors.ConfigError` when they are wrong).
        link_rules: Which links a page offers its spider (from ``settings``; not an
            argument).
    """

    settings: Settings
    fetcher: Fetcher
    robots: RobotsCache | None
    spider: Spider
    scope: Scope
    frontier: Frontier
    politeness: Politeness
    warc: WarcWriter | None = None
    throttle: AutoThrottle | None = None
    pages: PageWork = field(default_factory=PageWork)
    sitemap_rules: SitemapRules = field(init=False)
    link_rules: LinkRules = field(init=False)

    def __post_init__(self) -> None:
        if self.throttle is None and self.politeness.autothrottle:
            self.throttle = AutoThrottle(self.politeness)
        self.sitemap_rules = sitemap_rules_of(self.spider)
        self.link_rules = LinkRules.from_settings(self.settings)


def result_batch(outcomes: Iterable[Outcome]) -> ResultBatch:
    """The store's records of ``outcomes``: pages, items, dead letters, filtered records."""
    outcomes = list(outcomes)
    return ResultBatch(
        pages=[o.page for o in outcomes if o.page is not None],
        items=[item for o in outcomes for item in o.items],
        dead=[o.dead for o in outcomes if o.dead is not None],
        filtered=[o.filtered for o in outcomes if o.filtered is not None],
    )


async def process(lease: Lease, deps: Deps) -> Outcome:
    """Take one lease through robots.txt, fetch and parse, and decide its outcome.

    Never raises for a failure of the URL itself (those become RETRY or DEAD outcomes); only
    the frontier's errors (`crawlq.errors.FrontierUnavailable`) and cancellation propagate.
    When robots.txt had to be fetched first, the page is not fetched under the same lease: the
    outcome is RELEASE, and the caller gives the lease back without counting an attempt.
    """
    req = lease.request
    settings = deps.settings
    if lease.host_down:
        detail = f"{req.host} stopped answering: its circuit breaker gave up on it"
        return _dead(lease, HOST_UNREACHABLE, detail)
    if lease.attempt > 1 + settings.max_retries + EXTRA_DELIVERIES:
        return _dead(lease, "lease_expired", f"delivered {lease.attempt - 1} times, never settled")
    try:
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
                await _apply_crawl_delay(req.host, deps)
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
        result = await deps.fetcher.fetch(
            req.url,
            method=req.method,
            body=req.body,
            cookies=req.cookies,
            follow_redirects=False,
            truncate_body_bytes=MAX_BYTES + 1 if sitemap else None,
        )
    except RobotsUnreachable as exc:
        if exc.requested:
            return await _failed(lease, exc, deps)  # a strike: the host pauses
        # A failure remembered from another page's request: no request was sent for this
        # page, so it spends no attempt; it waits for the host's pause, as queued pages do.
        return Outcome(lease, Kind.RELEASE, reason="robots_unreachable_remembered")
    except FetchError as exc:
        if exc.reason == FilterReason.PRIVATE_ADDRESS:
            return _private_address(lease, exc)
        return await _failed(lease, exc, deps)
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
        await _throttle(req.host, result, deps.throttle, deps)
    if result.location is not None:
        return await _redirected(lease, result, result.location, deps)
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
        record = await _page_record(
            lease, result, deps, final_url=result.final_url, title=None, error=_status_error(result)
        )
        return Outcome(lease, Kind.PAGE, page=record)
    work = functools.partial(read_sitemap, req, result.body, deps.scope, deps.sitemap_rules)
    try:
        listed = await deps.pages.run(work, deps.settings.parse_timeout_s)
    except PageTimeout:
        logger.warning("%s: reading the sitemap ran past parse_timeout_s", req.url)
        error = f"parse_timeout: reading the sitemap ran past {deps.settings.parse_timeout_s:g}s"
        record = await _page_record(
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
    record = await _page_record(
        lease, result, deps, final_url=result.final_url, title=None, error=sitemap.error
    )
    return Outcome(lease, Kind.PAGE, page=record, links=listed.requests, skipped=listed.skipped)


def _status_error(result: FetchResult) -> str:
    """The ``error`` of a page that was not parsed for its status (3xx, 4xx...)."""
    if 300 <= result.status < 400:
        return f"redirect_not_followed: {result.headers.get('location', '')}"
    return f"http_{result.status}"


async def _failed(lease: Lease, exc: FetchError, deps: Deps) -> Outcome:
    """Retry or dead-letter a failed fetch; a pushback or connection failure pauses the host."""
    req = lease.request
    settings = deps.settings
    strike = strike_of(exc)
    if strike is not None:
        retry_after_s = exc.retry_after_s if isinstance(exc, RetryableStatus) else None
        plan = deps.politeness.plan(strike, retry_after_s)
        count = await deps.frontier.host_strike(req.host, strike, plan)
        pause_s = plan.pauses_s[min(count, len(plan.pauses_s)) - 1]
        logger.warning(
            "%s: %s %d in a row (%s); no request to it for %.1fs from any worker",
            req.host,
            strike,
            count,
            exc.reason,
            pause_s,
        )
        dead_reason = deps.politeness.dead_reason(strike, count, retry_after_s)
        if dead_reason is not None:
            logger.warning("dead %s: %s (%s)", req.url, dead_reason, exc)
            return _dead(lease, dead_reason, str(exc))
    decision = decide(
        exc,
        lease.attempt,
        max_retries=settings.max_retries,
        base_s=settings.retry_delay_s,
        cap_s=settings.retry_max_delay_s,
    )
    if decision.retry:
        logger.info(
            "retry %s in %.2fs (attempt %d): %s",
            req.url,
            decision.delay_s,
            lease.attempt,
            decision.detail,
        )
        return Outcome(lease, Kind.RETRY, retry_delay_s=decision.delay_s, reason=decision.reason)
    logger.warning("dead %s after %d attempts: %s", req.url, lease.attempt, decision.detail)
    return _dead(lease, decision.reason, decision.detail)


async def _apply_crawl_delay(host: str, deps: Deps) -> None:
    """Raise the host's delay to its robots.txt Crawl-delay, for every worker (politeness)."""
    if deps.robots is None:
        return
    crawl_delay_s = deps.robots.crawl_delay_s(host)
    if crawl_delay_s is None:
        return
    policy = deps.politeness.policy_for(host, crawl_delay_s)
    if policy != (deps.politeness.configured(host) or deps.politeness.default):
        logger.info(
            "%s: robots.txt Crawl-delay %.2fs, delay now %.2fs",
            host,
            crawl_delay_s,
            policy.delay_s,
        )
        await deps.frontier.set_host_policy(host, policy)


async def _throttle(host: str, result: FetchResult, throttle: AutoThrottle, deps: Deps) -> None:
    """Feed the response's latency to AutoThrottle; write the host's new delay if it moved."""
    crawl_delay_s = None if deps.robots is None else deps.robots.crawl_delay_s(host)
    floor = deps.politeness.policy_for(host, crawl_delay_s)
    ok = result.status < 400
    policy = throttle.observe(host, result.elapsed_s, ok=ok, floor=floor)
    if policy is not None:
        logger.debug("%s: autothrottle delay %.3fs", host, policy.delay_s)
        await deps.frontier.set_host_policy(host, policy)


async def _redirected(lease: Lease, result: FetchResult, location: str, deps: Deps) -> Outcome:
    """Store the redirect as a page of its own and queue its target (module docstring)."""
    method, keep_body = redirected_method(result.status, lease.request.method)
    return await _hop(lease, result, location, method, keep_body, deps)


async def _hop(
    lease: Lease,
    result: FetchResult,
    location: str,
    method: str,
    keep_body: bool,
    deps: Deps,
    page: _Parsed | None = None,
) -> Outcome:
    """Store a redirecting page and queue its target as a hop (3xx, or ``page``'s refresh)."""
    req = lease.request
    chain = req.meta.get("redirect_urls")
    chain = list(chain) if isinstance(chain, list) else []
    hops = len(chain) + 1
    if hops > deps.settings.max_redirects:
        detail = f"more than {deps.settings.max_redirects} redirects: {req.url} -> {location}"
        return _dead(lease, "too_many_redirects", detail)
    skipped: Counter[str] = Counter()
    links: list[CrawlRequest] = []
    error: str | None = None
    cookies = result.location_cookies
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
            revisit=bool(cookies) and _revisits(location, [*chain, req.url]),
            referrer=req.url,
        )
    except (InvalidURL, ValueError) as exc:
        target, error = None, f"redirect_invalid: {exc}"
    if target is not None:
        target, reason = deps.scope.admit(target)
        if reason is None:
            links.append(target)
        else:
            skipped[reason] += 1
            error = f"redirect_not_followed: {location}"
    final_url = location if target is None else target.url  # as queued: URL rules applied
    record = await _page_record(
        lease,
        result,
        deps,
        final_url=final_url,
        title=None if page is None else page.title,
        error=error if page is None or error is not None else page.error,
        canonical_url=None if page is None else page.canonical_url,
    )
    return Outcome(lease, Kind.PAGE, page=record, links=links, skipped=skipped)


def _revisits(location: str, chain: list[object]) -> bool:
    """Whether a redirect to ``location`` comes back to a URL of its chain (canonical URLs).

    ``chain`` holds the chain's URLs so far, the redirected request's last; it comes from
    ``meta``, which an inbox entry may fill with anything: what is not a URL is skipped.
    """
    target = url_keys(location).canonical
    for url in chain:
        try:
            if isinstance(url, str) and url_keys(url).canonical == target:
                return True
        except InvalidURL:
            continue
    return False


async def _parse(lease: Lease, result: FetchResult, deps: Deps) -> Outcome:
    """Parse the page and run the spider on the page thread (`crawlq.engine.pagework`).

    A body labelled HTML whose bytes are binary (`crawlq.decode.sniff`: a PDF, PNG or ZIP
    signature, a NUL byte) is not parsed: no title, no links; it is stored with the error
    ``binary_body: <why>``, and its callback sees it as any binary response (empty text).
    """
    req = lease.request
    page = await parse_response(
        req, result, deps.spider, deps.scope, deps.settings, deps.pages, deps.link_rules
    )
    if page.refresh_url is not None:  # a meta refresh: a redirect, no callback
        return await _hop(lease, result, page.refresh_url, "GET", False, deps, page)
    record = await _page_record(
        lease,
        result,
        deps,
        final_url=result.final_url,
        title=page.title,
        error=page.error,
        canonical_url=page.canonical_url,
    )
    return Outcome(
        lease, Kind.PAGE, page=record, items=page.items, links=page.links, skipped=page.skipped
    )


async def parse_response(
    req: CrawlRequest,
    result: FetchResult,
    spider: Spider,
    scope: Scope,
    settings: Settings,
    pages: PageWork,
    link_rules: LinkRules,
) -> _Parsed:
    """Parse a response and run the spider's callback on it: the parse step of `process`.

    Shared by the crawl and ``crawlq reparse`` (which gives a response stored earlier), so
    both decide alike which responses reach a callback, screen hostile HTML, bound the time
    (``parse_timeout_s``, on ``pages``' thread) and keep the same items and links.

    Args:
        req: The request the response answers (its callback, ``cb_kwargs`` and ``meta``).
        result: The response.
        spider: The spider whose callback runs.
        scope: Which of the requests the callback yields are kept (the others are counted
            in ``skipped``).
        settings: Limits: ``max_html_depth``, ``max_links_per_page``, ``parse_timeout_s``.
        pages: The page thread.
        link_rules: Which links the page offers the spider (`crawlq.links.LinkRules`).

    Returns:
        The page's title, canonical URL and error (None, ``http_404``, ``spider_error:
        KeyError: …``, ``parse_timeout: …``), the callback's items and in-scope requests, and
        the requests skipped by reason. When the page is a meta refresh (``refresh_url`` set),
        the callback has not run: the caller follows the refresh instead.
    """
    error: str | None = None
    parse = 200 <= result.status < 300 or spider.wants_status(result.status)
    if 300 <= result.status < 400:
        error = f"redirect_not_followed: {result.headers.get('location', '')}"
        parse = False
    elif not 200 <= result.status < 300:
        error = f"http_{result.status}"
    elif result.binary is not None:  # labelled HTML, but not: no title, no links from it
        error = f"binary_body: {result.binary}"
    page = _Parsed(error)
    if parse or result.is_html:
        page.tags = result.text.count("<")
        work = functools.partial(
            _parse_page, req, result, spider, scope, settings, page, parse, link_rules
        )
        try:
            if page.tags <= INLINE_MAX_TAGS and _builtin_callback(spider, req, parse):
                page = work()
            else:
                page = await pages.run(work, settings.parse_timeout_s)
        except PageTimeout:
            logger.warning(
                "%s: parsing and the callback ran past parse_timeout_s (%gs); storing the page"
                " without them",
                req.url,
                settings.parse_timeout_s,
            )
            page = _Parsed(
                f"parse_timeout: parsing or the callback ran past {settings.parse_timeout_s:g}s"
            )
        if page.refresh_url is not None:  # a meta refresh: the caller follows it
            return page
        if page.callback is not None:  # an async callback: the rest runs on the loop
            try:
                found_items, found_requests = await page.callback.finish()
            except SpiderError as exc:
                page.spider_failed(exc)
            else:
                page.take(found_items, found_requests, req, spider, scope, settings)
    if spider_error_type(page.error) is not None:
        logger.error("spider error on %s: %s", req.url, page.error, exc_info=page.exc_info)
    return page


@dataclass(slots=True)
class _Parsed:
    """What parsing a page and its callback produced (the page thread fills it)."""

    error: str | None
    title: str | None = None
    canonical_url: str | None = None
    refresh_url: str | None = None  # a meta refresh to follow instead of the callback
    items: list[ItemRecord] = field(default_factory=list)
    links: list[CrawlRequest] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    link_skips: Counter[str] | None = None  # the Response's links left out, by reason
    callback: CallbackRun | None = None
    tags: int = 0  # "<" in the text
    link_tags: int = 0
    exc_info: BaseException | None = None

    def spider_failed(self, exc: SpiderError) -> None:
        """Record a failed callback: user code, so the page is stored and the crawl goes on."""
        self.error = spider_error(exc.kind, f"callback {exc.callback!r}: {exc.detail}")
        self.exc_info = exc
        self.callback = None

    def take(
        self,
        found_items: list[dict[str, Any]],
        found_requests: list[CrawlRequest],
        req: CrawlRequest,
        spider: Spider,
        scope: Scope,
        settings: Settings,
    ) -> None:
        """Keep the callback's items and in-scope requests, at most ``max_links_per_page``."""
        now = time.time()
        self.items = [
            ItemRecord(req.record_fingerprint, i, req.url, spider.name, item, now)
            for i, item in enumerate(found_items)
        ]
        bad = _first_unserialisable(found_items)
        if bad is not None:
            detail = f"item is not JSON-serialisable: {bad}"
            self.error, self.items = spider_error(UNSERIALISABLE_ITEM, detail), []
        if self.link_skips:
            self.skipped.update(self.link_skips)
        cap = settings.max_links_per_page
        for yielded in found_requests[:cap]:
            if yielded.referrer != req.url:  # the page that yielded it, whatever it claimed
                yielded = dataclasses.replace(yielded, referrer=req.url)
            child, reason = scope.admit(yielded)  # session ids stripped, traps refused
            if reason is None:
                self.links.append(child)
            else:
                self.skipped[reason] += 1
        found = max(len(found_requests), self.link_tags)
        if found > cap and self.error is None:
            self.error = f"links_capped: {cap} of {found}"
            logger.warning("%s: %d links, only the first %d taken", req.url, found, cap)


def _builtin_callback(spider: Spider, req: CrawlRequest, parse: bool) -> bool:
    """True when the page goes to no callback, or to the base `Spider.parse` (follow_all)."""
    if not parse:
        return True
    return req.callback in (None, "parse") and getattr(type(spider), "parse", None) is Spider.parse


def _parse_page(
    req: CrawlRequest,
    result: FetchResult,
    spider: Spider,
    scope: Scope,
    settings: Settings,
    page: _Parsed,
    parse: bool,
    rules: LinkRules,
) -> _Parsed:
    """Screen, parse, scan, and the callback's synchronous part: the page thread's work."""
    tree = None
    markup = None
    scan = None
    if result.is_html:
        screened = screen_html(
            result.text, settings.max_html_depth, settings.max_links_per_page, tags=page.tags
        )
        if screened.too_deep is not None:
            page.error = f"html_too_deep: more than {settings.max_html_depth} nested elements"
            return page
        markup, page.link_tags = screened.markup, screened.link_tags
        tree = parse_html(markup)
        page.title = extract_title(tree)
        scan = scan_page(tree, result.final_url)
        page.canonical_url = scan.canonical_url
        if scan.refresh is not None and _follows_refresh(scan.refresh, result, settings):
            page.refresh_url = scan.refresh.url
            return page
    if not parse:
        return page
    response = Response(req, result, tree=tree, markup=markup, scan=scan, rules=rules)
    page.link_skips = response.skipped_links
    try:
        run = start_callback(spider, response)
    except SpiderError as exc:
        page.spider_failed(exc)
        return page
    if run.pending is not None:
        page.callback = run
    else:
        page.take(run.items, run.requests, req, spider, scope, settings)
    return page


def _follows_refresh(refresh: Refresh, result: FetchResult, settings: Settings) -> bool:
    """True when a page's meta refresh is followed as a redirect (module docstring).

    Not when ``meta_refresh`` is off, the delay is over ``meta_refresh_max_delay_s``, the
    refresh reloads the page itself, or the response is a 3xx (its ``Location`` decides).
    """
    return (
        settings.meta_refresh
        and refresh.url is not None
        and refresh.delay_s <= settings.meta_refresh_max_delay_s
        and not 300 <= result.status < 400
    )


async def _page_record(
    lease: Lease,
    result: FetchResult,
    deps: Deps,
    *,
    final_url: str,
    title: str | None,
    error: str | None,
    canonical_url: str | None = None,
) -> PageRecord:
    """The page record of a response, archived first when the crawl writes WARC files."""
    req = lease.request
    page = PageRecord(
        fingerprint=req.record_fingerprint,
        url=req.url,
        final_url=final_url,
        status=result.status,
        content_type=result.content_type,
        depth=req.depth,
        title=title,
        fetched_at=time.time(),
        size_bytes=len(result.body),
        elapsed_s=result.elapsed_s,
        attempt=lease.attempt,
        error=error,
        spider=deps.spider.name,
        body=result.body if deps.settings.store_body else None,
        canonical_url=canonical_url,
        referrer=req.referrer,
        request=req.to_json(),
    )
    if deps.warc is not None:
        warc = await _archive(deps.warc, req, result, page.fetched_at)
        if warc is not None:
            page = dataclasses.replace(page, warc_file=warc.file, warc_offset=warc.offset)
    return page


def _first_unserialisable(items: list[dict[str, Any]]) -> str | None:
    """Why the first item that cannot be stored as JSON fails (NaN included), or None."""
    for item in items:
        try:
            json.dumps(item, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return str(exc)
    return None


async def _archive(
    warc: WarcWriter, req: CrawlRequest, result: FetchResult, fetched_at: float
) -> WarcLocation | None:
    """Write the page's WARC records; on failure (disk full) log it and store it unarchived."""
    try:
        return await warc.write(result, fetched_at=fetched_at)
    except StoreError as exc:
        logger.error("cannot archive %s, storing the page without WARC records: %s", req.url, exc)
        return None


def _private_address(lease: Lease, exc: FetchError) -> Outcome:
    """The FILTERED outcome of a request the private-address guard refused (never retried)."""
    req = lease.request
    logger.info("filtered %s: %s", req.url, exc.detail)
    reason = FilterReason.PRIVATE_ADDRESS
    record = FilteredRecord(req.record_fingerprint, req.url, reason, req.depth, time.time())
    return Outcome(lease, Kind.FILTERED, filtered=record, reason=reason)


def _dead(lease: Lease, reason: str, detail: str) -> Outcome:
    req = lease.request
    record = DeadRecord(
        req.record_fingerprint,
        req.url,
        reason,
        detail,
        lease.attempt,
        req.depth,
        time.time(),
        req.referrer,
    )
    return Outcome(lease, Kind.DEAD, dead=record, reason=reason)
