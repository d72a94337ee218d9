"""What the store keeps: one record type per outcome of a crawled URL.

docs/architecture.md invariant 1: every URL that passes scope and dedup ends as exactly one of a
`PageRecord`, a `DeadRecord` or a `FilteredRecord`, each keyed by the request fingerprint, so
writing one twice (a re-delivered lease) overwrites instead of duplicating.

What a store is given is here too, beside the records: `ResultBatch` (a worker's flush) and
`ParseUpdate` (a reparse) check their records at construction (20-byte fingerprints, items
that belong to a page of the same batch, distinct non-negative item indexes) and raise
ValueError naming the URL, so a backend never sees a malformed one; `ResultBatch.resolved` and
`last_update_wins` apply "the latest record of a key wins" within one call, before a backend
writes (`crawlq.store.contract.Store.write`, ``Store.replace_parse``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = [
    "FINGERPRINT_BYTES",
    "SPIDER_ERROR_PREFIX",
    "UNSERIALISABLE_ITEM",
    "DeadRecord",
    "FilteredRecord",
    "ItemRecord",
    "PageRecord",
    "ParseUpdate",
    "ResultBatch",
    "last_update_wins",
    "spider_error",
    "spider_error_type",
]

SPIDER_ERROR_PREFIX = "spider_error: "
"""How a page's ``error`` starts when the spider failed on it (its callback raised, yielded
something that is neither an item nor a request, or an item JSON cannot hold). The rest is
``<kind>: <detail>`` (`spider_error`); stores select such pages by this prefix."""

_ERROR_KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_LEGACY_ERROR = re.compile(r"SpiderError: callback '[^']*' on \S+: ([A-Za-z_][A-Za-z0-9_.]*): ")
"""The form crawlq wrote before errors carried their kind up front."""
UNSERIALISABLE_ITEM = "UnserialisableItem"
"""The kind of a spider error whose callback yielded an item JSON cannot hold."""


def spider_error(kind: str, detail: str) -> str:
    """A page's ``error`` for a spider failure: ``spider_error: <kind>: <detail>``.

    Args:
        kind: What failed, one word: the exception class name (``KeyError``),
            ``MissingCallback`` or `UNSERIALISABLE_ITEM`.
        detail: The message (which callback, and the exception's text).
    """
    return f"{SPIDER_ERROR_PREFIX}{kind}: {detail}"


def spider_error_type(error: str | None) -> str | None:
    """The kind of a spider error, as counted per type, or None when ``error`` is not one.

    Reads what `spider_error` writes, and the forms of earlier crawlq versions
    (``spider_error: SpiderError: callback 'parse' on URL: KeyError: …`` and
    ``spider_error: item is not JSON-serialisable: …``).
    """
    if error is None or not error.startswith(SPIDER_ERROR_PREFIX):
        return None
    rest = error[len(SPIDER_ERROR_PREFIX) :]
    legacy = _LEGACY_ERROR.match(rest)
    if legacy:
        return legacy.group(1)
    if rest.startswith("item is not JSON-serialisable"):
        return UNSERIALISABLE_ITEM
    kind = rest.split(":", 1)[0].strip()
    return kind if _ERROR_KIND.fullmatch(kind) else "SpiderError"


@dataclass(frozen=True, slots=True)
class PageRecord:
    """A fetched response and what the crawler learnt from it.

    Attributes:
        fingerprint: 20-byte request fingerprint, the record's key.
        url: The requested URL.
        final_url: URL after redirects.
        status: HTTP status of the final response.
        content_type: Media type without parameters ("" if absent).
        depth: Link depth from the seeds.
        title: Text of the HTML ``<title>``, or None.
        fetched_at: Unix time in seconds when the fetch completed.
        size_bytes: Body size in bytes after content decoding.
        elapsed_s: Fetch time in seconds.
        attempt: Which delivery produced this record (1 = first try).
        error: Why the page was not parsed (``http_404`` …), or None.
        spider: Name of the spider that parsed it.
        body: The body (after content decoding), only when the store is asked to keep
            bodies (``store_body``); else None.
        warc_file: Name of the WARC file that holds the page's response record (no
            directory), when the crawl archives to WARC (``warc_dir``); else None.
        warc_offset: Byte offset of that response record in ``warc_file`` (where its gzip
            member starts), or None.
        canonical_url: The page's ``<link rel="canonical">``, resolved against its base
            and normalised, when it names an http(s) URL; else None.
        referrer: URL of the page that linked to (or redirected to) this one; None for a
            seed, an inbox entry without one, or a page stored before crawlq kept it.
        request: The request that was fetched, as `crawlq.request.CrawlRequest.to_json`
            (its callback, ``cb_kwargs``, ``meta``, method and body), so that ``crawlq
            reparse`` calls the same callback; None for pages stored before crawlq kept it.
    """

    fingerprint: bytes
    url: str
    final_url: str
    status: int
    content_type: str
    depth: int
    title: str | None
    fetched_at: float
    size_bytes: int
    elapsed_s: float
    attempt: int
    error: str | None = None
    spider: str = "default"
    body: bytes | None = None
    warc_file: str | None = None
    warc_offset: int | None = None
    canonical_url: str | None = None
    referrer: str | None = None
    request: str | None = None


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """One item a spider yielded for a page.

    Attributes:
        fingerprint: Fingerprint of the page request that produced it.
        index: 0-based position among that page's items (part of the key).
        url: The page URL.
        spider: Spider name.
        data: The item, a JSON-serialisable dict.
        created_at: Unix time in seconds.
    """

    fingerprint: bytes
    index: int
    url: str
    spider: str
    data: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class DeadRecord:
    """A URL given up on: a permanent failure, or transient ones past ``max_retries``.

    Attributes:
        fingerprint: Request fingerprint (the key).
        url: The requested URL.
        reason: Short code of the last failure (``http_503``, ``timeout``, ``body_too_large``).
        detail: Human-readable detail of the last failure.
        attempts: How many fetches were tried.
        depth: Link depth from the seeds.
        at: Unix time in seconds.
        referrer: URL of the page that linked to this one (None: a seed, or unknown).
    """

    fingerprint: bytes
    url: str
    reason: str
    detail: str
    attempts: int
    depth: int
    at: float
    referrer: str | None = None


@dataclass(frozen=True, slots=True)
class FilteredRecord:
    """A URL that was queued but deliberately not fetched (for instance robots.txt).

    Attributes:
        fingerprint: Request fingerprint (the key).
        url: The URL.
        reason: Short code (``robots_txt``).
        depth: Link depth from the seeds.
        at: Unix time in seconds.
    """

    fingerprint: bytes
    url: str
    reason: str
    depth: int
    at: float


# -- what a store is given: a worker's flush, a reparse -------------------------------------------


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
