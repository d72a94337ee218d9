"""What an HTML page says, read with selectolax (lexbor). No scope logic lives here.

A page is parsed once with `parse_html`; the tree is shared by `scan_page`, `extract_title`
and the spider's `crawlq.spider.Response.tree`. `scan_page` walks the tree once, in document
order, for the links and the few ``<base>``, ``<meta>`` and ``<link>`` elements that say
something about the page itself: its base URL, a ``<meta http-equiv="refresh">`` (parsed by
`parse_refresh`, the HTML Standard's shared declarative refresh steps), a
``<link rel="canonical">`` and ``<meta name="robots">`` directives.

`extract_links` (and `PageScan.links`) returns the crawlable page links of a document: the
``href`` of every ``<a>`` and ``<area>``, resolved against the first ``<base href>`` (itself
resolved against the page URL), fragments dropped, non-http(s) schemes and asset URLs (the
``skip_extensions`` setting, by default `IGNORED_EXTENSIONS`) skipped, each URL normalised
with `crawlq.urls.normalize`, duplicates removed in first-seen order. `PageScan.links` also
tells which links are all marked ``rel="nofollow"``, and lists those skipped for their
extension. Whether a link is *followed* (nofollow, domains, depth, robots.txt) is decided
later, by the spider (`crawlq.spider.Response.follow_all`) and the engine, which also
decides what a link left out is counted as: the scope's reason before ``extension`` before
``nofollow`` (`crawlq.engine.parse.ParsedPage.take`).

Hostile pages are bounded before lexbor sees them (`screen_html`): `html_depth_over`
estimates how deeply the elements of a document nest, and `cut_at_links` cuts a document
with more link tags than a cap.

Where each part is written (import them from here):

* `crawlq.links.scan`: `parse_html`, `extract_title`, `document_base`; `scan_page`,
  `PageScan`, `PageLinks`, `extract_links`; `LinkRules` and `IGNORED_EXTENSIONS`.
* `crawlq.links.refresh`: `parse_refresh` and `Refresh`.
* `crawlq.links.screen`: `screen_html`, `cut_at_links`, `Screened`; `html_depth_over`, the
  nesting estimate.
"""

from crawlq.links.refresh import Refresh, parse_refresh
from crawlq.links.scan import (
    IGNORED_EXTENSIONS,
    LinkRules,
    PageLinks,
    PageScan,
    document_base,
    extract_links,
    extract_title,
    parse_html,
    scan_page,
)
from crawlq.links.screen import (
    DEPTH_CHECK_MIN_TAGS,
    Screened,
    cut_at_links,
    html_depth_over,
    screen_html,
)

__all__ = [
    "DEPTH_CHECK_MIN_TAGS",
    "IGNORED_EXTENSIONS",
    "LinkRules",
    "PageLinks",
    "PageScan",
    "Refresh",
    "Screened",
    "cut_at_links",
    "document_base",
    "extract_links",
    "extract_title",
    "html_depth_over",
    "parse_html",
    "parse_refresh",
    "scan_page",
    "screen_html",
]
