"""Sitemaps (the sitemaps.org protocol 0.9), in two parts that both engines use.

* `crawlq.sitemap.reader`: reading a sitemap file (XML urlset or index, text, gzipped or not)
  as a stream, under the protocol's limits (50,000 URLs, 50 MB), refusing DTDs, into the
  types of `crawlq.sitemap.sitemap` (the parsed sitemap, the limits).
* `crawlq.sitemap.requests`: the requests a sitemap or a robots.txt ``Sitemap:`` line leads
  to (depth, priority, ``lastmod``, scope), the request marker (`SITEMAP_CALLBACK`) and the
  spider's ``sitemap_rules``/``sitemap_follow`` (`SitemapRules`).

Pure functions and plain types, no I/O: the engine fetches a sitemap like any request
(`crawlq.engine.step`) and hands its body to `read_sitemap` on the page thread.
"""

from crawlq.sitemap.reader import parse_sitemap
from crawlq.sitemap.requests import (
    LASTMOD_KEY,
    MAX_NESTING,
    NESTING_KEY,
    SITEMAP_CALLBACK,
    Listed,
    SitemapRules,
    is_sitemap,
    listed_priority,
    read_sitemap,
    robots_sitemaps,
    sitemap_request,
)
from crawlq.sitemap.sitemap import (
    MAX_BYTES,
    MAX_URLS,
    MAX_VALUE_CHARS,
    Sitemap,
    SitemapEntry,
    SitemapKind,
)

__all__ = [
    "LASTMOD_KEY",
    "MAX_BYTES",
    "MAX_NESTING",
    "MAX_URLS",
    "MAX_VALUE_CHARS",
    "NESTING_KEY",
    "SITEMAP_CALLBACK",
    "Listed",
    "Sitemap",
    "SitemapEntry",
    "SitemapKind",
    "SitemapRules",
    "is_sitemap",
    "listed_priority",
    "parse_sitemap",
    "read_sitemap",
    "robots_sitemaps",
    "sitemap_request",
]
