"""How one leased URL ended (`Outcome`), the records the store gets, and what a run counts.

Both engines settle what `crawlq.engine.step.process` returns: the native worker
(`crawlq.engine.worker`) and the Celery runtime (`crawlq.celery.runtime.jobs`). What they share
about outcomes lives here: the kinds (`Kind`), the page record of a response (`page_record`,
archived first when the crawl writes WARC; a WARC write that fails, disk full, is logged and
the page stored unarchived), the store's records of a batch (`result_batch`: pages, items,
dead letters, filtered records, and the job they count for, `stored_job`), the dead letter of
a URL (`dead_outcome`), including the ``internal_error`` one of a URL whose processing raised
an exception that is a bug, not the URL's failure (`internal_error`), and what a run did,
counted from its outcomes (`WorkerCounters`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from crawlq.engine.deps import Deps
from crawlq.errors import StoreError
from crawlq.records import (
    DeadRecord,
    FilteredRecord,
    ItemRecord,
    PageRecord,
    spider_error_type,
)
from crawlq.request import CrawlRequest, FetchResult, Lease
from crawlq.settings import Settings
from crawlq.store import ResultBatch

if TYPE_CHECKING:
    from crawlq.store.warc import WarcLocation, WarcWriter

__all__ = [
    "Kind",
    "Outcome",
    "WorkerCounters",
    "dead_outcome",
    "internal_error",
    "not_followed",
    "page_record",
    "result_batch",
    "status_error",
    "stored_job",
]

logger = logging.getLogger(__name__)


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
        detail: What a RELEASE's ``reason`` stands for, in words, when a caller may report it
            (``proxy_failed``: which proxy, without its credentials, and why), else ``""``.
        skipped: Discovered links not followed, by scope reason.
        dropped: Items not stored, by ``"<pipeline>: <reason>"`` (validation, pipelines,
            item dedup: `crawlq.engine.item_flow`).
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
    detail: str = ""
    skipped: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)

    def revisit(self) -> CrawlRequest | None:
        """The redirect hop back into its chain that this outcome queues, or None.

        A redirect to a URL its chain fetched already (a cookie wall's ``302`` + ``Set-Cookie``
        back to itself, ``/p`` -> ``/p#top``, ``/a`` -> ``/b`` -> ``/a``) is followed by a
        revisit of that URL (`crawlq.engine.redirects`), whose record, a page or a
        ``redirect_loop`` dead letter, replaces the one that URL has: one record per URL.
        When that revisit is queued (new to the job), this page is counted as a hop, not a
        page of its own (`WorkerCounters.count`, `crawlq.engine.metrics.WorkerMetrics.settled`):
        each revisit replaces one record, so each redirect that queued one adds none.
        """
        if self.page is None:
            return None
        for link in self.links:
            if link.revisit and link.url == self.page.final_url:
                return link
        return None

    def is_hop(self, queued: Collection[bytes]) -> bool:
        """Whether this page counts as a hop: its `revisit` is in ``queued`` (fingerprints)."""
        r = self.revisit()
        return r is not None and r.fingerprint in queued


def result_batch(outcomes: Iterable[Outcome], *, job: str | None = None) -> ResultBatch:
    """The store's records of ``outcomes``: pages, items, dead letters, filtered records.

    ``job``: the job they count for in the store (`stored_job`), or None.
    """
    outcomes = list(outcomes)
    return ResultBatch(
        pages=[o.page for o in outcomes if o.page is not None],
        items=[item for o in outcomes for item in o.items],
        dead=[o.dead for o in outcomes if o.dead is not None],
        filtered=[o.filtered for o in outcomes if o.filtered is not None],
        job=job,
    )


def stored_job(settings: Settings) -> str | None:
    """The job a crawl's results count for in its store (``Store.counts(job=...)``).

    The shared job's name (a Redis frontier, either engine); None for an embedded crawl,
    whose store holds one crawl: its results count only in the store's total.
    """
    return settings.job if settings.frontier is not None else None


def dead_outcome(lease: Lease, reason: str, detail: str) -> Outcome:
    """The DEAD outcome of ``lease``: its dead-letter record, with ``reason`` and ``detail``."""
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


def internal_error(lease: Lease, exc: Exception) -> Outcome:
    """The dead letter of a lease whose processing raised ``exc`` (a bug, logged here).

    The reason is ``internal_error`` and the detail names the exception, so the URL is
    settled (never fetched again in a loop) and can be replayed once the bug is fixed.
    """
    logger.exception("internal error processing %s", lease.request.url, exc_info=exc)
    return dead_outcome(lease, "internal_error", f"{type(exc).__name__}: {exc}")


def not_followed(location: str) -> str:
    """The ``error`` of a redirect page whose target is not followed (``Location`` as sent).

    ``redirect_not_followed: <Location>``, or ``redirect_not_followed: (no Location)`` for a
    3xx without one (or an empty one), so the record never ends in a blank target.
    """
    return f"redirect_not_followed: {location or '(no Location)'}"


def status_error(result: FetchResult) -> str:
    """The ``error`` of a page that was not parsed for its status: a 3xx's, or ``http_<status>``."""
    if 300 <= result.status < 400:
        return not_followed(result.headers.get("location", ""))
    return f"http_{result.status}"


async def page_record(
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


async def _archive(
    warc: WarcWriter, req: CrawlRequest, result: FetchResult, fetched_at: float
) -> WarcLocation | None:
    """Write the page's WARC records; on failure (disk full) log it and store it unarchived."""
    try:
        return await warc.write(result, fetched_at=fetched_at)
    except StoreError as exc:
        logger.error("cannot archive %s, storing the page without WARC records: %s", req.url, exc)
        return None


_NUMBERS = ("pages", "items", "retries", "links", "round_trips")
_BY_REASON = ("dead", "filtered", "skipped", "spider_errors", "dropped")


@dataclass(slots=True)
class WorkerCounters:
    """What one worker did in this run (totals across runs live in the store).

    Attributes:
        pages: Page records written (a redirect whose revisit was queued is a hop, not a
            page: `Outcome.revisit`).
        items: Items written (a page's, and an errback's for a dead letter or a filtered
            request).
        retries: Transient failures sent back for a retry.
        dead: URLs dead-lettered, by reason.
        filtered: URLs skipped after leasing (robots.txt), by reason.
        skipped: Discovered links not followed, by scope reason (per occurrence), or
            ``frontier_full``: refused by a Redis at its maxmemory (also in ``links``).
        spider_errors: Pages stored with a spider error, by kind (``KeyError`` …; see
            `crawlq.records.spider_error_type`).
        dropped: Items not stored, by ``"<pipeline>: <reason>"`` (``validation: invalid: field
            price: …``, ``item_dedup: duplicate_item``, a pipeline's `DropItem` reason).
        links: Discovered links pushed to the frontier (before dedup).
        round_trips: Requests to the frontier's backend (`Frontier.round_trips`) in this run.
        started_s: `time.monotonic` at the start of `Worker.run`.
    """

    pages: int = 0
    items: int = 0
    retries: int = 0
    dead: Counter[str] = field(default_factory=Counter)
    filtered: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    spider_errors: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    links: int = 0
    round_trips: int = 0
    started_s: float = field(default_factory=time.monotonic)

    def count(self, o: Outcome, *, hop: bool = False) -> None:
        """Count a settled outcome (its links, skips, and its page, dead letter or filter).

        ``hop``: its page is a redirect whose revisit was queued (`Outcome.is_hop`), not a
        page: the revisit's record replaces one, and is counted then.
        """
        self.links += len(o.links)
        self.skipped.update(o.skipped)
        if o.dropped:
            self.dropped.update(o.dropped)
        if hop:
            return
        self.items += len(o.items)  # a page's, or an errback's for a dead letter or a filter
        if o.kind is Kind.PAGE:
            self.pages += 1
            kind = spider_error_type(o.page.error) if o.page is not None else None
            if kind is not None:
                self.spider_errors[kind] += 1
        elif o.kind is Kind.DEAD:
            self.dead[o.reason] += 1
        elif o.kind is Kind.FILTERED:
            self.filtered[o.reason] += 1

    def as_json(self) -> dict[str, Any]:
        """The counts as JSON values (`summed` reads them back; ``started_s`` is left out)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _NUMBERS}
        out.update({name: dict(getattr(self, name)) for name in _BY_REASON})
        return out

    @classmethod
    def summed(cls, reports: Iterable[Mapping[str, Any]], started_s: float) -> WorkerCounters:
        """The counters of several workers' `as_json` reports together.

        Raises:
            ValueError: A report is not one of `as_json`'s shape (a count not an integer).
        """
        total = cls(started_s=started_s)
        for report in reports:
            for name in _NUMBERS:
                setattr(total, name, getattr(total, name) + _count(report[name]))
            for name in _BY_REASON:
                counts = report.get(name, {}) if name == "dropped" else report[name]
                if not isinstance(counts, Mapping):
                    raise ValueError(f"{name}: expected an object, got {counts!r}")
                getattr(total, name).update({str(k): _count(n) for k, n in counts.items()})
        return total


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected a count, got {value!r}")
    return value
