"""The result store contract: what workers write and what exports read.

Every backend (`SqliteStore` embedded, a PostgreSQL store later) implements `Store` and passes
the one conformance suite in ``tests/store/test_contract.py``. The semantics are written here
once, from the caller's side.

Keys and outcomes (docs/architecture.md invariant 1): every record is keyed by its request
fingerprint (20 bytes). A fingerprint is stored as exactly one of a page, a dead letter or a
filtered record; the latest write wins, and a write replaces whatever that fingerprint had
before, in any of the three. A page owns its items: they are replaced as a whole whenever the
page is written, and removed when the fingerprint becomes dead or filtered.

Spider errors: a page whose ``error`` starts with `crawlq.records.SPIDER_ERROR_PREFIX` is one
the spider failed on. Stores count them per kind (`StoreCounts.spider_errors_by_type`), select
them (``pages(spider_errors_only=True)``), and let ``crawlq reparse`` replace a page's parse
results (error and items) without touching the rest of its row (`Store.replace_parse`).

Times are Unix seconds as ``float`` everywhere (``fetched_at``, ``created_at``, ``at``,
``since``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from crawlq.records import (
    SPIDER_ERROR_PREFIX,
    DeadRecord,
    FilteredRecord,
    ItemRecord,
    PageRecord,
    spider_error_type,
)

__all__ = [
    "FINGERPRINT_BYTES",
    "LOOKUP_MAX",
    "SPIDER_ERROR_SQL",
    "ParseUpdate",
    "ResultBatch",
    "Store",
    "StoreCounts",
    "StoredOutcome",
    "dead_from_row",
    "filtered_from_row",
    "item_from_row",
    "last_update_wins",
    "outcomes_from_rows",
    "page_from_row",
    "spider_error_counts",
]

_R = TypeVar("_R")
_K = TypeVar("_K", bound=Hashable)

FINGERPRINT_BYTES = 20
"""Length of a request fingerprint in bytes (SHA-1, see `crawlq.urls.fingerprint`)."""

SPIDER_ERROR_SQL = f"substr(error, 1, {len(SPIDER_ERROR_PREFIX)}) = '{SPIDER_ERROR_PREFIX}'"
"""The SQL condition (SQLite and PostgreSQL alike) of a page with a spider error; the SQL
stores' partial index ``pages_spider_errors`` has the same condition, so that selecting and
counting these pages does not read the others."""


@dataclass(frozen=True, slots=True)
class ResultBatch:
    """The results one worker flush carries, written by `Store.write` in one transaction.

    The sequences are copied into tuples at construction, so later changes to the caller's
    lists do not change the batch.

    Attributes:
        pages: Fetched pages.
        items: Items of those pages. Every item must belong to a page of the same batch: a
            page's items are exactly the items written with it.
        dead: URLs given up on.
        filtered: URLs deliberately not fetched.

    Raises:
        ValueError: A fingerprint is not 20 bytes, an item index is negative, or an item's
            fingerprint has no page in ``pages``; the message names the URL.
    """

    pages: Sequence[PageRecord] = ()
    items: Sequence[ItemRecord] = ()
    dead: Sequence[DeadRecord] = ()
    filtered: Sequence[FilteredRecord] = ()

    def __post_init__(self) -> None:
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
        for item in self.items:
            if item.fingerprint not in page_fps:
                raise ValueError(
                    f"item {item.index} of {item.url!r} has no page in the batch; "
                    "write items together with their page"
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
        return ResultBatch(pages=pages, items=items, dead=dead, filtered=filtered)


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


def spider_error_counts(rows: Sequence[Sequence[Any]]) -> dict[str, int]:
    """Spider-error pages per kind, from ``(text after the prefix up to ':', count)`` rows.

    The SQL stores group by that text; `crawlq.records.spider_error_type` turns each into the
    kind (older forms included), and counts of one kind are added up.
    """
    counts: dict[str, int] = {}
    for token, n in rows:
        kind = spider_error_type(f"{SPIDER_ERROR_PREFIX}{token or ''}:") or "SpiderError"
        counts[kind] = counts.get(kind, 0) + int(n)
    return counts


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """How many records the store holds, as returned by `Store.counts`.

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
"""Most fingerprints one `Store.lookup` call takes."""


@dataclass(frozen=True, slots=True)
class StoredOutcome:
    """What the store holds for one fingerprint (`Store.lookup`).

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
        page (and its items) or the other kind of record. An empty batch is a no-op.

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

    async def counts(self) -> StoreCounts:
        """Return how many records of each kind the store holds, as of one moment.

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


# Row layouts shared by the SQL backends: each stream selects its columns in this order.


def page_from_row(row: Sequence[Any]) -> PageRecord:
    """A page from a row of its fields in declaration order (fingerprint … request)."""
    return PageRecord(*row)


def last_update_wins(updates: Sequence[ParseUpdate]) -> list[ParseUpdate]:
    """One update per fingerprint, the last one given (see `Store.replace_parse`)."""
    return _last_wins(updates, lambda u: u.fingerprint)


def item_from_row(row: Sequence[Any], data: dict[str, Any]) -> ItemRecord:
    """An item from ``(created_at, fingerprint, idx, url, spider, …)`` and its decoded data."""
    return ItemRecord(row[1], row[2], row[3], row[4], data, row[0])


def dead_from_row(row: Sequence[Any]) -> DeadRecord:
    """A dead letter from ``(at, fingerprint, url, reason, detail, attempts, depth, referrer)``."""
    return DeadRecord(row[1], row[2], row[3], row[4], row[5], row[6], row[0], row[7])


def outcomes_from_rows(
    pages: Sequence[Sequence[Any]],
    items: Sequence[Sequence[Any]],
    dead: Sequence[Sequence[Any]],
    filtered: Sequence[Sequence[Any]],
) -> dict[bytes, StoredOutcome]:
    """`Store.lookup`'s answer from the SQL backends' rows.

    Pages as `page_from_row` (body None), ``(fingerprint, count)`` of items, dead letters as
    `dead_from_row`, filtered records as `filtered_from_row`.
    """
    counts = {bytes(fp): int(n) for fp, n in items}
    out: dict[bytes, StoredOutcome] = {}
    for row in pages:
        page = page_from_row(row)
        fp = bytes(page.fingerprint)
        out[fp] = StoredOutcome(page=page, items=counts.get(fp, 0))
    for row in dead:
        record = dead_from_row(row)
        out.setdefault(bytes(record.fingerprint), StoredOutcome(dead=record))
    for row in filtered:
        f = filtered_from_row(row)
        out.setdefault(bytes(f.fingerprint), StoredOutcome(filtered=f))
    return out


def filtered_from_row(row: Sequence[Any]) -> FilteredRecord:
    """A filtered URL from ``(at, fingerprint, url, reason, depth)``."""
    return FilteredRecord(row[1], row[2], row[3], row[4], row[0])
