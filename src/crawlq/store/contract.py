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
given is defined here too: `ResultBatch` (a worker's flush) and `ParseUpdate` (a reparse) check
their records at construction (20-byte fingerprints, items that belong to a page of the same
batch, distinct non-negative item indexes) and raise ValueError naming the URL, so a backend
never sees a malformed one; `ResultBatch.resolved` and `last_update_wins` apply "the latest
record of a key wins" within one call, before a backend writes. The SQL, row layouts and
streaming the SQL backends share: `crawlq.store.sql` (import their names from there).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord

__all__ = [
    "FINGERPRINT_BYTES",
    "LOOKUP_MAX",
    "ParseUpdate",
    "ResultBatch",
    "Store",
    "StoreCounts",
    "StoredOutcome",
    "last_update_wins",
]

_R = TypeVar("_R")
_K = TypeVar("_K", bound=Hashable)

FINGERPRINT_BYTES = 20
"""Length of a request fingerprint in bytes (SHA-1, see `crawlq.urls.fingerprint`)."""


@dataclass(frozen=True, slots=True)
class ResultBatch:
    """The results one worker flush carries, written by ``Store.write`` in one transaction.

    The sequences are copied into tuples at construction, so later changes to the caller's
    lists do not change the batch.

    Attributes:
        pages: Fetched pages.
        items: Items of those pages (and of those dead letters: what a request's errback
            yielded). Every item must belong to a page or dead letter of the same batch: a
            page's items are exactly the items written with it.
        dead: URLs given up on.
        filtered: URLs deliberately not fetched.
        job: Name of the shared job whose worker produced the batch, written with its pages,
            dead letters and filtered records (``Store.counts(job=...)`` counts them); None
            for an embedded crawl, whose records count for no job, only in the store's total.

    Raises:
        ValueError: A fingerprint is not 20 bytes, an item index is negative, an item's
            fingerprint has no page or dead letter in the batch (the message names the URL),
            or ``job`` is
            an empty string.
    """

    pages: Sequence[PageRecord] = ()
    items: Sequence[ItemRecord] = ()
    dead: Sequence[DeadRecord] = ()
    filtered: Sequence[FilteredRecord] = ()
    job: str | None = None

    def __post_init__(self) -> None:
        if self.job is not None and (not isinstance(self.job, str) or not self.job):
            raise ValueError(f"job must be a non-empty name or None, got {self.job!r}")
        for name in ("pages", "items", "dead", "filtered"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        records: tuple[PageRecord | ItemRecord | DeadRecord | FilteredRecord, ...] = (
            *self.pages,
            *self.items,
            *self.dead,
            *self.filtered,
        )
        for record in records:
            fp = record.fingerprint
            if not isinstance(fp, bytes) or len(fp) != FINGERPRINT_BYTES:
                raise ValueError(
                    f"fingerprint of {record.url!r} must be {FINGERPRINT_BYTES} bytes, got {fp!r}"
                )
        page_fps = {page.fingerprint for page in self.pages}
        page_fps.update(dead.fingerprint for dead in self.dead)
        for item in self.items:
            if item.fingerprint not in page_fps:
                raise ValueError(
                    f"item {item.index} of {item.url!r} has no page or dead letter in the "
                    "batch; write items together with their page"
                )
            if item.index < 0:
                raise ValueError(f"item index of {item.url!r} must be >= 0, got {item.index}")

    def __len__(self) -> int:
        """Number of records of all kinds."""
        return len(self.pages) + len(self.items) + len(self.dead) + len(self.filtered)

    def resolved(self) -> ResultBatch:
        """Return the batch a backend writes: one record per key, outcomes exclusive.

        Within one batch, a later record with the same key replaces an earlier one of the same
        kind (key: fingerprint; for items fingerprint and index). When one fingerprint appears
        in several kinds, a page beats a dead letter, which beats a filtered record. The first
        position of each key is kept, so the order stays deterministic.
        """
        pages = _last_wins(self.pages, lambda r: r.fingerprint)
        page_fps = {page.fingerprint for page in pages}
        dead = [
            r
            for r in _last_wins(self.dead, lambda r: r.fingerprint)
            if r.fingerprint not in page_fps
        ]
        taken = page_fps | {r.fingerprint for r in dead}
        filtered = [
            r
            for r in _last_wins(self.filtered, lambda r: r.fingerprint)
            if r.fingerprint not in taken
        ]
        items = _last_wins(self.items, lambda r: (r.fingerprint, r.index))
        return ResultBatch(pages=pages, items=items, dead=dead, filtered=filtered, job=self.job)


def _last_wins(records: Sequence[_R], key: Callable[[_R], _K]) -> list[_R]:
    chosen: dict[_K, _R] = {}
    for record in records:
        chosen[key(record)] = record
    return list(chosen.values())


@dataclass(frozen=True, slots=True)
class ParseUpdate:
    """A stored page parsed again (``crawlq reparse``): what replaces its parse results.

    Attributes:
        fingerprint: The page's fingerprint.
        fetched_at: The page's ``fetched_at`` as it was read: the update applies only to that
            version of the page, never to one fetched again since.
        error: The page's new ``error`` (None: the callback succeeded).
        spider: Name of the spider that parsed it.
        items: Its new items (all of them; possibly none), with the page's fingerprint and
            distinct indexes.

    Raises:
        ValueError: The fingerprint is not 20 bytes, an item belongs to another page, or
            two items share an index or one is negative.
    """

    fingerprint: bytes
    fetched_at: float
    error: str | None
    spider: str
    items: Sequence[ItemRecord] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))
        fp = self.fingerprint
        if not isinstance(fp, bytes) or len(fp) != FINGERPRINT_BYTES:
            raise ValueError(f"fingerprint must be {FINGERPRINT_BYTES} bytes, got {fp!r}")
        indexes: set[int] = set()
        for item in self.items:
            if item.fingerprint != fp:
                raise ValueError(f"item {item.index} of {item.url!r} belongs to another page")
            if item.index < 0 or item.index in indexes:
                raise ValueError(f"item index {item.index} of {item.url!r} is negative or repeated")
            indexes.add(item.index)


def last_update_wins(updates: Sequence[ParseUpdate]) -> list[ParseUpdate]:
    """One update per fingerprint, the last one given (see ``Store.replace_parse``)."""
    return _last_wins(updates, lambda u: u.fingerprint)


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
