"""What the store keeps: one record type per outcome of a crawled URL.

ARCHITECTURE.md invariant 1: every URL that passes scope and dedup ends as exactly one of a
`PageRecord`, a `DeadRecord` or a `FilteredRecord`, each keyed by the request fingerprint, so
writing one twice (a re-delivered lease) overwrites instead of duplicating.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeadRecord", "FilteredRecord", "ItemRecord", "PageRecord"]


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
