"""What a parsed sitemap is: its kind, its entries, its counts and problems; the limits.

Plain types, no parsing (`crawlq.sitemap.reader` fills them). The limits are the sitemaps.org
protocol's (https://www.sitemaps.org/protocol.html): 50,000 URLs and 52,428,800 bytes
uncompressed per file, for an index too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "MAX_BYTES",
    "MAX_URLS",
    "MAX_VALUE_CHARS",
    "Sitemap",
    "SitemapEntry",
    "SitemapKind",
]

MAX_URLS = 50_000
"""Most URLs (or, in an index, sitemaps) taken from one file (sitemaps.org)."""

MAX_BYTES = 52_428_800
"""Largest sitemap read, in bytes, uncompressed: 50 MB as sitemaps.org counts them."""

MAX_VALUE_CHARS = 4096
"""Longest ``<loc>``, ``<lastmod>`` or ``<priority>`` value kept, in characters (the
protocol's URLs are under 2,048); a longer one makes its entry invalid."""


class SitemapKind(StrEnum):
    """What a sitemap file turned out to be."""

    URLSET = "urlset"
    INDEX = "sitemapindex"
    TEXT = "text"


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One ``<url>`` (or ``<sitemap>``, or text line) of a sitemap.

    Attributes:
        loc: The URL as written, whitespace stripped (not validated here).
        lastmod: ``<lastmod>`` as written (W3C Datetime), or None.
        priority: ``<priority>`` clamped to 0.0..1.0, or None when absent or not a number.
    """

    loc: str
    lastmod: str | None = None
    priority: float | None = None


@dataclass(slots=True)
class Sitemap:
    """A parsed sitemap file.

    Attributes:
        kind: What it is, or None when it was not recognised (see `error`).
        entries: Its entries in document order, at most ``max_urls``.
        found: Entries with a ``<loc>`` seen in all, including those over the limit.
        invalid: Entries without a usable ``<loc>`` (missing or over `MAX_VALUE_CHARS`).
        too_large: More than ``max_bytes`` (uncompressed): only that much was parsed.
        problems: Error codes with their detail, in the order met.
    """

    kind: SitemapKind | None = None
    entries: list[SitemapEntry] = field(default_factory=list)
    found: int = 0
    invalid: int = 0
    too_large: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        """The page record's ``error``: every problem, ``; ``-separated, or None."""
        return "; ".join(self.problems) if self.problems else None
