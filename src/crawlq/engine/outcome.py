"""How one leased URL ended (`Outcome`), and the records the store gets for a batch of them.

Both engines settle what `crawlq.engine.step.process` returns: the native worker
(`crawlq.engine.worker`) and the Celery runtime (`crawlq.celery.runtime.jobs`). What they share
about outcomes lives here: the kinds (`Kind`), the store's records of a batch
(`result_batch`: pages, items, dead letters, filtered records, and the job they count for,
`stored_job`), and the dead letter of a URL
(`dead_outcome`), including the ``internal_error`` one of a URL whose processing raised an
exception that is a bug, not the URL's failure (`internal_error`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from crawlq.records import (
    DeadRecord,
    FilteredRecord,
    ItemRecord,
    PageRecord,
)
from crawlq.request import CrawlRequest, Lease
from crawlq.settings import Settings
from crawlq.store import ResultBatch

__all__ = ["Kind", "Outcome", "dead_outcome", "internal_error", "result_batch", "stored_job"]

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
    skipped: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)

    def revisit(self) -> CrawlRequest | None:
        """The link that, once fetched, replaces this outcome's page record, or None.

        A cookie wall's redirect (``302`` + ``Set-Cookie`` back to its own URL) is followed
        by a revisit of the same URL with the cookie (`crawlq.engine.redirects`): both have
        the URL's ``record_fingerprint``, so the revisit's record replaces this page's. When
        that revisit is queued (new to the job), this page is a hop, not a page of its own:
        the worker metrics count it so (`crawlq.engine.metrics.WorkerMetrics.settled`).
        """
        if self.page is None:
            return None
        own = self.lease.request.record_fingerprint
        for link in self.links:
            if link.revisit and link.record_fingerprint == own:
                return link
        return None


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
