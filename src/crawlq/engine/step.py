"""One leased URL through the pipeline: robots.txt, fetch, parse, and the decision.

`process` is what both engines share. It performs no store or frontier writes of its own
(except claiming a redirect target, which must happen before parsing); it returns an
`Outcome` that the caller writes in batches: the store first, then the discovered links, then
the lease is settled, so a crash at any point re-delivers the URL instead of losing it.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from crawlq.errors import FetchError, InvalidURL, StoreError
from crawlq.fetch import Fetcher
from crawlq.frontier import Frontier
from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.request import CrawlRequest, FetchResult, Lease
from crawlq.retry import decide
from crawlq.robots import RobotsCache
from crawlq.scope import FilterReason, Scope
from crawlq.settings import Settings
from crawlq.spider import Response, Spider, SpiderError, run_callback
from crawlq.urls import canonicalize

if TYPE_CHECKING:
    from crawlq.store.warc import WarcLocation, WarcWriter

__all__ = ["Deps", "Kind", "Outcome", "process"]

logger = logging.getLogger(__name__)


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
        links: In-scope requests discovered (to push).
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
        frontier: Used only to claim redirect targets.
        warc: Where each fetched page's request and response are archived, or None.
    """

    settings: Settings
    fetcher: Fetcher
    robots: RobotsCache | None
    spider: Spider
    scope: Scope
    frontier: Frontier
    warc: WarcWriter | None = None


async def process(lease: Lease, deps: Deps) -> Outcome:
    """Take one lease through robots.txt, fetch and parse, and decide its outcome.

    Never raises for a failure of the URL itself (those become RETRY or DEAD outcomes); only
    the frontier's errors (`crawlq.errors.FrontierUnavailable`) and cancellation propagate.
    When robots.txt had to be fetched first, the page is not fetched under the same lease: the
    outcome is RELEASE, and the caller gives the lease back without counting an attempt.
    """
    req = lease.request
    settings = deps.settings
    if lease.attempt > 1 + settings.max_retries + EXTRA_DELIVERIES:
        return _dead(lease, "lease_expired", f"delivered {lease.attempt - 1} times, never settled")
    try:
        if deps.robots is not None:
            cached = deps.robots.is_fresh(req.url)
            if not await deps.robots.allowed(req.url):
                return Outcome(
                    lease,
                    Kind.FILTERED,
                    filtered=FilteredRecord(
                        req.fingerprint, req.url, FilterReason.ROBOTS_TXT, req.depth, time.time()
                    ),
                    reason=FilterReason.ROBOTS_TXT,
                )
            if not cached:  # this lease's politeness slot went to robots.txt
                return Outcome(lease, Kind.RELEASE, reason="robots_txt_fetched")
        result = await deps.fetcher.fetch(
            req.url,
            method=req.method,
            body=req.body,
            redirect_guard=lambda url: _redirect_guard(url, req, deps.scope),
        )
    except FetchError as exc:
        if exc.reason == FilterReason.PRIVATE_ADDRESS:
            return _private_address(lease, exc)
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
            return Outcome(
                lease, Kind.RETRY, retry_delay_s=decision.delay_s, reason=decision.reason
            )
        logger.warning("dead %s after %d attempts: %s", req.url, lease.attempt, decision.detail)
        return _dead(lease, decision.reason, decision.detail)
    logger.info(
        "%s %s %d %dB %.3fs attempt=%d",
        req.method,
        req.url,
        result.status,
        len(result.body),
        result.elapsed_s,
        lease.attempt,
    )
    return await _parse(lease, result, deps)


def _redirect_guard(url: str, req: CrawlRequest, scope: Scope) -> str | None:
    """Stop a redirect that leaves the crawl's scope (the target's own depth is the same)."""
    try:
        target = CrawlRequest(url, depth=req.depth)
    except InvalidURL as exc:
        return f"redirect_invalid: {exc.reason}"
    reason = scope.check(target)
    return None if reason is None else f"redirect_{reason}"


async def _parse(lease: Lease, result: FetchResult, deps: Deps) -> Outcome:
    req = lease.request
    spider = deps.spider
    error: str | None = None
    parse = 200 <= result.status < 300 or spider.wants_status(result.status)
    if 300 <= result.status < 400:
        error = f"redirect_not_followed: {result.headers.get('location', '')}"
        parse = False
    elif not 200 <= result.status < 300:
        error = f"http_{result.status}"
    if (
        parse
        and result.final_url != req.url
        and canonicalize(result.final_url) != canonicalize(req.url)
    ):
        target = CrawlRequest(result.final_url, depth=req.depth, priority=req.priority)
        (owned,) = await deps.frontier.claim(req.fingerprint, [target])
        if not owned:
            error = "redirect_to_seen_url"
            parse = False
    response = Response(req, result)
    items: list[ItemRecord] = []
    links: list[CrawlRequest] = []
    skipped: Counter[str] = Counter()
    title = response.title if result.is_html else None
    if parse:
        try:
            found_items, found_requests = await run_callback(spider, response)
        except Exception as exc:  # user code: record the error on the page, keep crawling
            logger.exception("spider error on %s", req.url)
            name = type(exc).__name__ if not isinstance(exc, SpiderError) else "SpiderError"
            error = f"spider_error: {name}: {exc}"
        else:
            now = time.time()
            items = [
                ItemRecord(req.fingerprint, i, req.url, spider.name, item, now)
                for i, item in enumerate(found_items)
            ]
            bad = _first_unserialisable(found_items)
            if bad is not None:
                error, items = f"spider_error: item is not JSON-serialisable: {bad}", []
            for child in found_requests:
                reason = deps.scope.check(child)
                if reason is None:
                    links.append(child)
                else:
                    skipped[reason] += 1
    fetched_at = time.time()
    warc = None if deps.warc is None else await _archive(deps.warc, req, result, fetched_at)
    page = PageRecord(
        fingerprint=req.fingerprint,
        url=req.url,
        final_url=result.final_url,
        status=result.status,
        content_type=result.content_type,
        depth=req.depth,
        title=title,
        fetched_at=fetched_at,
        size_bytes=len(result.body),
        elapsed_s=result.elapsed_s,
        attempt=lease.attempt,
        error=error,
        spider=spider.name,
        body=result.body if deps.settings.store_body else None,
        warc_file=None if warc is None else warc.file,
        warc_offset=None if warc is None else warc.offset,
    )
    return Outcome(lease, Kind.PAGE, page=page, items=items, links=links, skipped=skipped)


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
    record = FilteredRecord(req.fingerprint, req.url, reason, req.depth, time.time())
    return Outcome(lease, Kind.FILTERED, filtered=record, reason=reason)


def _dead(lease: Lease, reason: str, detail: str) -> Outcome:
    req = lease.request
    record = DeadRecord(
        req.fingerprint, req.url, reason, detail, lease.attempt, req.depth, time.time()
    )
    return Outcome(lease, Kind.DEAD, dead=record, reason=reason)
