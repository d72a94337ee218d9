"""What the store keeps: one record type per outcome of a crawled URL.

docs/architecture.md invariant 1: every URL that passes scope and dedup ends as exactly one of a
`PageRecord`, a `DeadRecord` or a `FilteredRecord`, each keyed by the request fingerprint, so
writing one twice (a re-delivered lease) overwrites instead of duplicating.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SPIDER_ERROR_PREFIX",
    "UNSERIALISABLE_ITEM",
    "DeadRecord",
    "FilteredRecord",
    "ItemRecord",
    "PageRecord",
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
