"""The result store contract: what workers write, what exports read, and what a store answers.

Every backend (`crawlq.store.sqlite.SqliteStore` embedded, `crawlq.store.postgres.PostgresStore`
shared) implements `Store` and passes the one conformance suite in
``tests/store/test_contract.py``. The semantics are written here once, from the caller's side.

Keys and outcomes (docs/architecture.md invariant 1): every record is keyed by its request
fingerprint (20 bytes). A fingerprint is stored as exactly one of a page, a dead letter or a
filtered record; the latest write wins, and a write replaces whatever that fingerprint had
before, in any of the three. A page owns its items: they are replaced as a whole whenever the
page is written, and removed when the fingerprint becomes dead or filtered. A dead letter may
own items too (those its request's errback yielded, `crawlq.spider.Failure`): written with it,
replaced as a page's are.

Spider errors: a page whose ``error`` starts with `crawlq.records.SPIDER_ERROR_PREFIX` is one
the spider failed on. Stores count them per kind (`StoreCounts.spider_errors_by_type`), select
them (``pages(spider_errors_only=True)``), and let ``crawlq reparse`` replace a page's parse
results (error and items) without touching the rest of its row (`Store.replace_parse`).

Jobs: a batch names the shared job that wrote it (`ResultBatch.job`), and the store keeps
that name with each page, dead letter and filtered record, so ``counts(job=...)`` counts one
job's results in a store several jobs write into (``crawlq status``), and
``pages(job=...)`` streams one job's pages (``crawlq dashboard``'s slowest hosts).

Times are Unix seconds as ``float`` everywhere (``fetched_at``, ``created_at``, ``at``,
``since``).

What a store answers is defined here beside `Store`: `StoreCounts` (``Store.counts``; spider
errors counted per kind, the exception class name, `crawlq.records.spider_error_type`) and
`StoredOutcome` (``Store.lookup``, at most `LOOKUP_MAX` fingerprints a call). What a store is
given, `crawlq.records.ResultBatch` (a worker's flush) and `crawlq.records.ParseUpdate` (a
reparse), lives beside the records it carries and checks them at construction. The SQL, row
layouts and streaming the SQL backends share: `crawlq.store.sql` (import their names there).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from crawlq.records import (
    DeadRecord,
    FilteredRecord,
    ItemRecord,
    PageRecord,
    ParseUpdate,
    ResultBatch,
)

__all__ = ["LOOKUP_MAX", "Store", "StoreCounts", "StoredOutcome"]


class Store(Protocol):
    """Where crawl results live: pages, their items, dead letters and filtered URLs.

    A store is used from one event loop. Its methods may be awaited concurrently; the backend
    serialises what must be serialised. Several processes (workers) may write to one store at
    once.

    Errors common to every method:

    * `crawlq.errors.StoreUnavailable`: the backend cannot be reached or stays locked past its
      timeout. Nothing was written; keep the results and retry with backoff.
    * `crawlq.errors.StoreError`: any other backend failure (disk full, corrupt file, the
      store was closed); the message names the store.
    """

    async def write(self, batch: ResultBatch) -> None:
        """Write one worker flush atomically and durably, idempotent by fingerprint.

        All of ``batch.resolved()`` is committed in one transaction, or nothing is. When the
        call returns, the results survive a crash of this process, so the caller may ack the
        leases that produced them. Writing the same batch again (a re-delivered lease) leaves
        the store as after the first write: rows are overwritten, never duplicated.

        Per fingerprint, the record written last replaces whatever the store had: writing a
        page removes a dead or filtered record for it and replaces all the page's items with
        the batch's items for it (possibly none); writing a dead or filtered record removes a
        page (and its items) or the other kind of record, and a dead letter gets the batch's
        items for it (an errback's; possibly none). An empty batch is a no-op.

        If the awaiting task is cancelled, the write may or may not have been committed;
        repeating it is safe.

        Args:
            batch: The records to write.

        Raises:
            ValueError: An item's ``data`` is not JSON-serialisable (NaN and infinity included);
                the message names the item. Nothing was written.
            StoreUnavailable: See the class docstring.
            StoreError: See the class docstring.
        """
        ...

    async def counts(self, job: str | None = None) -> StoreCounts:
        """Return how many records of each kind the store holds, as of one moment.

        Several shared jobs may write into one store; each row remembers the job of the
        batch that wrote it last (`ResultBatch.job`), so a URL two jobs both fetched counts
        for the one that wrote it last. Rows written by an embedded crawl, or before the
        store knew jobs (schema 6), belong to no job: they count only in the whole store's
        numbers.

        Args:
            job: Count only that job's pages, dead letters and filtered records, and the
                items of its pages; its spider errors and per-status and per-reason counts
                likewise. None: the whole store (every job's rows and those of none).

        Returns:
            The counts; all 0 for a job that wrote nothing here.

        Raises:
            StoreUnavailable: See the class docstring.
            StoreError: See the class docstring.
        """
        ...

    async def replace_parse(self, updates: Sequence[ParseUpdate]) -> frozenset[bytes]:
        """Replace the parse results of stored pages (``crawlq reparse``), in one transaction.

        For each update whose page the store still holds with the same ``fetched_at``: the
        page's ``error`` and ``spider`` are set and its items replaced as a whole by the
        update's (items are keyed by page fingerprint and index). The rest of the row (status,
        body, WARC location, request) is kept. An update whose page is gone (now a dead or
        filtered record) or was fetched again since is skipped: the newer fetch wins.
        Applying the same updates again leaves the store as after the first time.

        Args:
            updates: At most one per fingerprint counts (a later one replaces an earlier one).

        Returns:
            The fingerprints of the pages updated.

        Raises:
            ValueError: An item's ``data`` is not JSON-serialisable; nothing was written.
            StoreUnavailable: See the class docstring.
            StoreError: See the class docstring (a read-only store included).
        """
        ...

    def pages(
        self,
        *,
        since: float | None = None,
        with_body: bool = False,
        spider_errors_only: bool = False,
        job: str | None = None,
    ) -> AsyncIterator[PageRecord]:
        """Stream stored pages in ``(fetched_at, fingerprint)`` order.

        Rows are read in chunks, so memory does not grow with the number of pages. The stream
        is not a snapshot: a page present and unchanged during the whole iteration is yielded
        exactly once; one written during it may be yielded or not, and a page rewritten during
        it (a later ``fetched_at``) can be yielded twice. Stopping early is safe.

        Args:
            since: Only pages with ``fetched_at >= since`` (Unix seconds); None: all.
            with_body: Load stored bodies into ``PageRecord.body``. When False (the default)
                every ``body`` is None, which keeps exports cheap.
            spider_errors_only: Only pages with a spider error (``error`` starting with
                `crawlq.records.SPIDER_ERROR_PREFIX`).
            job: Only the pages that job wrote last (as `counts` counts them: a page
                written by an embedded crawl, or before schema 6, belongs to no job). None:
                every page.

        Raises:
            StoreUnavailable: See the class docstring.
            StoreError: See the class docstring.
        """
        ...

    def items(self, *, since: float | None = None) -> AsyncIterator[ItemRecord]:
        """Stream stored items in ``(created_at, fingerprint, index)`` order.

        Chunked and not a snapshot, as `pages`.

        Args:
            since: Only items with ``created_at >= since`` (Unix seconds); None: all.

        Raises:
            StoreUnavailable: See the class docstring.
            StoreError: See the class docstring.
        """
        ...

    async def lookup(self, fingerprints: Sequence[bytes]) -> dict[bytes, StoredOutcome]:
        """Return what the store holds for each of ``fingerprints``, as of one moment.

        For ``crawlq inspect`` and ``crawlq dead list``: one read per kind of record, not a
        scan. Pages come without their bodies.

        Args:
            fingerprints: At most `LOOKUP_MAX` 20-byte fingerprints (duplicates allowed).

        Returns:
            The fingerprints the store has a record of, each with its outcome; the others
            are left out.

        Raises:
            ValueError: More than `LOOKUP_MAX` fingerprints.
            StoreUnavailable: See the class docstring.
            StoreError: See the class docstring.
        """
        ...

    def dead(self) -> AsyncIterator[DeadRecord]:
        """Stream dead letters in ``(at, fingerprint)`` order; chunked, as `pages`.

        Raises:
            StoreUnavailable: See the class docstring.
            StoreError: See the class docstring.
        """
        ...

    def filtered(self) -> AsyncIterator[FilteredRecord]:
        """Stream filtered URLs in ``(at, fingerprint)`` order; chunked, as `pages`.

        Raises:
            StoreUnavailable: See the class docstring.
            StoreError: See the class docstring.
        """
        ...

    async def close(self) -> None:
        """Release the backend's connections. Idempotent; later calls of others raise StoreError.

        Waits for writes already started to finish, so their results are not lost.
        """
        ...


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """How many records the store holds, as returned by ``Store.counts``.

    Attributes:
        pages: Stored pages.
        items: Stored items.
        dead: Dead letters.
        filtered: Filtered URLs.
        pages_by_status: Pages per HTTP status.
        dead_by_reason: Dead letters per reason code (``timeout``, ``http_503`` …).
        filtered_by_reason: Filtered URLs per reason code (``robots_txt`` …).
        spider_errors_by_type: Pages with a spider error, per kind (the exception class name
            such as ``KeyError``; see `crawlq.records.spider_error_type`).
    """

    pages: int
    items: int
    dead: int
    filtered: int
    pages_by_status: Mapping[int, int] = field(default_factory=dict)
    dead_by_reason: Mapping[str, int] = field(default_factory=dict)
    filtered_by_reason: Mapping[str, int] = field(default_factory=dict)
    spider_errors_by_type: Mapping[str, int] = field(default_factory=dict)

    @property
    def settled(self) -> int:
        """Fingerprints with an outcome: pages + dead + filtered (invariant 1)."""
        return self.pages + self.dead + self.filtered

    @property
    def spider_errors(self) -> int:
        """Pages with a spider error, of every kind."""
        return sum(self.spider_errors_by_type.values())


LOOKUP_MAX = 1000
"""Most fingerprints one ``Store.lookup`` call takes."""


@dataclass(frozen=True, slots=True)
class StoredOutcome:
    """What the store holds for one fingerprint (``Store.lookup``).

    Exactly one of a page, a dead letter or a filtered record (invariant 1).

    Attributes:
        page: The page (its ``body`` is not loaded: None), or None.
        items: How many items the page has (0 without a page).
        dead: The dead letter, or None.
        filtered: The filtered record, or None.
    """

    page: PageRecord | None = None
    items: int = 0
    dead: DeadRecord | None = None
    filtered: FilteredRecord | None = None

    @property
    def kind(self) -> Literal["page", "dead", "filtered"]:
        """Which record it is."""
        if self.page is not None:
            return "page"
        return "dead" if self.dead is not None else "filtered"
