"""What a store is given to write: a worker's flush (`ResultBatch`) and a reparse (`ParseUpdate`).

Both check their records at construction (20-byte fingerprints, items that belong to a page of
the same batch, distinct non-negative item indexes) and raise ValueError naming the URL, so a
backend never sees a malformed one. `ResultBatch.resolved` and `last_update_wins` apply the
rule "the latest record of a key wins" within one call, before a backend writes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord

__all__ = ["FINGERPRINT_BYTES", "ParseUpdate", "ResultBatch", "last_update_wins"]

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
