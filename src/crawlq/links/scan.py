"""An HTML page read once: its tree, title and base URL, and one walk for its links (`scan_page`).

The tree of `parse_html` (selectolax's lexbor, which repairs malformed HTML as a browser
does) is shared by `scan_page`, `extract_title` and the spider's
`crawlq.spider.Response.tree`. The base URL rule is the HTML Standard's: the first
``<base href>`` in tree order, resolved against the page URL, when it is an http(s) URL.

The walk, in document order, collects the ``<a>`` and ``<area>`` elements and the few
``<base>``, ``<meta>`` and ``<link>`` elements that say something about the page: its base URL,
a ``<meta http-equiv="refresh">`` (`crawlq.links.refresh`), a ``<link rel="canonical">`` and
``<meta name="robots">`` directives. `PageScan.links` (and `extract_links`) then gives the
crawlable links: resolved against the base (`crawlq.urls.references.HrefResolver`),
fragments dropped, non-http(s) schemes and ``skip_extensions`` left out, normalised with
`crawlq.urls.normalize`, each once in first-seen order, with those every occurrence of which
is marked ``rel="nofollow"``. Repeated hrefs are dropped before normalisation.

Which of those links a spider's `crawlq.spider.Response` offers to follow is `LinkRules`: two
settings decide it, ``skip_extensions`` (asset URLs left out, by default
`IGNORED_EXTENSIONS`) and ``obey_robots`` (``rel="nofollow"`` and ``<meta name="robots">``
honoured by `crawlq.spider.Response.follow_all`). Scope (domains, depth) is not decided here
but by the engine (`crawlq.rules.scope`).
"""

from __future__ import annotations

from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawlq.errors import InvalidURL
from crawlq.links.refresh import Refresh, refresh_of
from crawlq.request.crawl_request import MAX_URL_LENGTH
from crawlq.settings import DEFAULT_SKIP_EXTENSIONS, Settings
from crawlq.urls import encode_query, query_codec, resolve
from crawlq.urls.canonical import normalize_or_none
from crawlq.urls.references import HrefResolver, has_extension

__all__ = [
    "IGNORED_EXTENSIONS",
    "LinkRules",
    "PageLinks",
    "PageScan",
    "document_base",
    "extract_links",
    "extract_title",
    "parse_html",
    "resolve_base_href",
    "scan_page",
]

# The document base URL is the first <base href> in tree order, wherever the links are.
_BASE_SELECTOR = "base[href]"
_TITLE_SELECTOR = "title:not(svg *)"  # the HTML <title>, not an SVG image's <title>


def parse_html(text: str) -> LexborHTMLParser:
    """Parse an HTML document once; the tree is shared by links, title and the spider.

    Args:
        text: The decoded document (``FetchResult.text``); malformed HTML is repaired as a
            browser would.

    Returns:
        The lexbor tree.
    """
    return LexborHTMLParser(text)


def extract_title(tree: LexborHTMLParser) -> str | None:
    """Return the document ``<title>`` with runs of whitespace collapsed to one space.

    Args:
        tree: A tree from `parse_html`.

    Returns:
        The title text, or None when there is no ``<title>`` or it is blank.
    """
    node = tree.css_first(_TITLE_SELECTOR)
    if node is None:
        return None
    title = " ".join(node.text(deep=True).split())
    return title or None


def document_base(tree: LexborHTMLParser, page_url: str) -> str:
    """Return the URL that relative links of the document resolve against.

    Args:
        tree: A tree from `parse_html`.
        page_url: The absolute URL the document was served from (after redirects).

    Returns:
        The first ``<base href>`` resolved against ``page_url`` when it is an http(s) URL,
        else ``page_url``.
    """
    node = tree.css_first(_BASE_SELECTOR)
    return page_url if node is None else resolve_base_href(node.attrs.sget("href"), page_url)


def resolve_base_href(base_href: str, page_url: str) -> str:
    """``<base href>`` resolved against ``page_url``; ``page_url`` when not an http(s) URL."""
    href = base_href.strip()
    if not href:
        return page_url
    try:
        resolved = resolve(href, page_url)
    except InvalidURL:
        return page_url
    return resolved if resolved[:5].lower() in ("http:", "https") else page_url


IGNORED_EXTENSIONS: frozenset[str] = frozenset(DEFAULT_SKIP_EXTENSIONS)
"""Path extensions (lower case, no dot) that `extract_links` leaves out by default: the
default of the ``skip_extensions`` setting (`crawlq.settings.DEFAULT_SKIP_EXTENSIONS`)."""


@dataclass(frozen=True, slots=True)
class LinkRules:
    """How a spider's `crawlq.spider.Response` picks the links it offers to follow.

    Attributes:
        skip_extensions: Path extensions (lower case, no dot) whose links are left out
            (the ``skip_extensions`` setting).
        honour_nofollow: `crawlq.spider.Response.follow_all` without hrefs leaves out links
            marked ``rel="nofollow"``, and every link of a page whose ``<meta name="robots">``
            says ``nofollow`` or ``none`` (the ``obey_robots`` setting).
    """

    skip_extensions: frozenset[str] = IGNORED_EXTENSIONS
    honour_nofollow: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> LinkRules:
        """The rules of a crawl: ``skip_extensions`` and ``obey_robots``."""
        return cls(frozenset(settings.skip_extensions), settings.obey_robots)


@dataclass(frozen=True, slots=True)
class PageLinks:
    """The crawlable links of a page (`PageScan.links`).

    Attributes:
        urls: Absolute, normalised http(s) URLs, each once, in document order.
        nofollow: Those of ``urls`` whose every ``<a>``/``<area>`` has ``nofollow`` among its
            ``rel`` tokens (a URL also linked without it is not in here).
        skipped_extension: The links left out for their path extension (``skip_extensions``),
            normalised as ``urls`` are, each once, in document order. Whether the crawl
            counts one as ``extension`` or as out of scope is the engine's decision
            (`crawlq.engine.parse.ParsedPage.take`).
    """

    urls: tuple[str, ...]
    nofollow: frozenset[str]
    skipped_extension: tuple[str, ...] = ()


_ROBOTS_NOFOLLOW = frozenset({"nofollow", "none"})


class PageScan:
    """What an HTML document says about itself, from one walk of its tree (`scan_page`).

    Attributes:
        base: The document base URL: the first ``<base href>`` resolved against the page URL
            when it is an http(s) URL, else the page URL.
        refresh: The first ``<meta http-equiv="refresh">`` whose content parses
            (`parse_refresh`) and whose target is an http(s) URL (of a content at most
            `crawlq.request.MAX_URL_LENGTH` + 100 characters long), or None. Its target is
            resolved against `base`.
        canonical_url: The first ``<link rel="canonical" href>`` that is an http(s) URL of
            at most `crawlq.request.MAX_URL_LENGTH` characters, resolved against `base` and
            normalised; None when there is none.
        robots: Directives of every ``<meta name="robots" content>`` (comma-separated,
            lower-cased), e.g. ``{"noindex", "nofollow"}``. Names for one crawler
            (``googlebot``) are not read.
    """

    __slots__ = ("_anchors", "base", "canonical_url", "refresh", "robots")

    def __init__(
        self,
        anchors: list[LexborNode],
        base: str,
        refresh: Refresh | None,
        canonical_url: str | None,
        robots: frozenset[str],
    ) -> None:
        self._anchors = anchors
        self.base = base
        self.refresh = refresh
        self.canonical_url = canonical_url
        self.robots = robots

    @property
    def robots_nofollow(self) -> bool:
        """True when the page's ``<meta name="robots">`` says ``nofollow`` or ``none``."""
        return not self.robots.isdisjoint(_ROBOTS_NOFOLLOW)

    def links(  # noqa: C901  (the per-link hot loop: HTML rules in spec order, no calls)
        self,
        skip_extensions: frozenset[str] = IGNORED_EXTENSIONS,
        limit: int | None = None,
        encoding: str | None = None,
    ) -> PageLinks:
        """Return the crawlable links of the page (the rules of `extract_links`).

        Args:
            skip_extensions: Path extensions (lower case, no dot) whose links are left out
                (and listed in `PageLinks.skipped_extension`).
            limit: Most links returned (the first ones); None for all.
            encoding: The page's character encoding, for the queries of its links; None
                for UTF-8.
        """
        query_encoding = query_codec(encoding)
        resolver = HrefResolver(self.base)
        url_of_resolved: dict[str, str | None] = {}  # resolved href -> its URL (None: not a link)
        seen_urls: set[str] = set()
        urls: list[str] = []
        nofollow: set[str] = set()
        skipped_extension: dict[str, None] = {}  # distinct, in order
        for node in self._anchors:
            attrs = node.attributes  # one call for href and rel: cheaper than two lookups
            href = attrs.get("href")
            if not href:
                continue
            if query_encoding is not None:  # a page in another encoding than UTF-8
                href = encode_query(href, query_encoding)
            resolved = resolver.resolve(href)
            if resolved is None:
                continue
            rel = attrs.get("rel")
            marked_nofollow = rel is not None and "nofollow" in rel.lower().split()
            if resolved in url_of_resolved:
                earlier_url = url_of_resolved[resolved]
                if not marked_nofollow and earlier_url is not None:
                    nofollow.discard(earlier_url)
                continue
            if skip_extensions and has_extension(resolved, skip_extensions):
                url_of_resolved[resolved] = None
                skipped = normalize_or_none(resolved)
                if skipped is not None:
                    skipped_extension[skipped] = None
                continue
            url = url_of_resolved[resolved] = normalize_or_none(resolved)
            if url is None:
                continue
            if url in seen_urls:
                if not marked_nofollow:
                    nofollow.discard(url)
                continue
            seen_urls.add(url)
            urls.append(url)
            if marked_nofollow:
                nofollow.add(url)
            if len(urls) == limit:
                break
        return PageLinks(tuple(urls), frozenset(nofollow), tuple(skipped_extension))


_SCAN_SELECTOR = "a[href], area[href], base[href], meta[content], link[rel][href]"
"""One walk in document order finds the links, the base and what the head says."""


def scan_page(tree: LexborHTMLParser, page_url: str) -> PageScan:
    """Walk the tree once for its links, base, meta refresh, canonical URL and meta robots.

    The walk is the one link extraction needs anyway (`extract_links`): the ``<meta>`` and
    ``<link>`` elements it also matches are a handful per page. Elements count wherever they
    are (a ``<meta>`` in the body too, as browsers do for refresh).

    Args:
        tree: A tree from `parse_html`.
        page_url: The absolute http(s) URL the document was served from (after redirects).

    Returns:
        The scan; its `PageScan.links` resolves the links on demand.
    """
    anchors: list[LexborNode] = []
    base_href: str | None = None
    refreshes: list[str] = []
    canonicals: list[str] = []
    robots: set[str] = set()
    for node in tree.css(_SCAN_SELECTOR):
        tag = node.tag
        if tag == "a" or tag == "area":
            anchors.append(node)
            continue
        attrs = node.attributes  # a few per page; values are None for a bare attribute
        if tag == "meta":
            content = attrs.get("content") or ""
            equiv = attrs.get("http-equiv")
            if equiv is not None and equiv.strip().lower() == "refresh":
                refreshes.append(content)
                continue
            name = attrs.get("name")
            if name is not None and name.strip().lower() == "robots":
                robots.update(d.strip().lower() for d in content.split(","))
        elif tag == "link":
            rel = attrs.get("rel")
            if rel is not None and "canonical" in rel.lower().split():
                canonicals.append(attrs.get("href") or "")
        elif tag == "base" and base_href is None:
            base_href = attrs.get("href") or ""
    base = page_url if base_href is None else resolve_base_href(base_href, page_url)
    refresh = canonical = None
    if refreshes or canonicals:  # a few pages in a crawl
        refresh, canonical = _head_targets(refreshes, canonicals, base, page_url)
    robots.discard("")
    return PageScan(anchors, base, refresh, canonical, frozenset(robots))


def _head_targets(
    refreshes: list[str], canonicals: list[str], base: str, page_url: str
) -> tuple[Refresh | None, str | None]:
    """The first meta refresh and the first canonical URL that resolve (`PageScan`'s rules).

    Args:
        refreshes: The ``content`` of each ``<meta http-equiv="refresh">``, in document order.
        canonicals: The ``href`` of each ``<link rel="canonical">``, in document order.
        base: The document base URL.
        page_url: The URL the document was served from.

    Returns:
        ``(refresh, canonical)``, each None when none of its candidates resolves.
    """
    resolver = HrefResolver(base)
    refresh = canonical = None
    for content in refreshes:
        refresh = refresh_of(content, resolver, base, page_url)
        if refresh is not None:
            break
    for href in canonicals:
        resolved = resolver.resolve(href) if len(href) <= MAX_URL_LENGTH else None
        canonical = None if resolved is None else normalize_or_none(resolved)
        if canonical is not None:
            break
    return refresh, canonical


def extract_links(
    tree: LexborHTMLParser,
    base_url: str,
    limit: int | None = None,
    encoding: str | None = None,
    *,
    skip_extensions: frozenset[str] = IGNORED_EXTENSIONS,
) -> list[str]:
    """Return the crawlable links of a page, normalised, de-duplicated, in document order.

    Takes the ``href`` of every ``<a>`` and ``<area>``. Relative links are resolved against
    the first ``<base href>`` (resolved against ``base_url``; ignored when it is not an
    http(s) URL) or else ``base_url``. Skipped silently: empty and fragment-only hrefs,
    ``javascript:``, ``mailto:``, ``tel:``, ``data:``, ``ftp:`` and every other non-http(s)
    scheme, paths ending in one of ``skip_extensions``, and URLs that
    `crawlq.urls.normalize` rejects. Fragments are dropped. ``rel="nofollow"`` is not
    looked at here (`PageScan.links` reports it). Hrefs are resolved as browsers resolve
    them (WHATWG URL Standard, `crawlq.urls.resolve`), and the non-ASCII characters of a
    query are percent-encoded in the page's ``encoding``, those of a path in UTF-8
    (`crawlq.urls.encode_query`).

    Args:
        tree: A tree from `parse_html`.
        base_url: The absolute http(s) URL the document was served from (after redirects).
        limit: Most links returned (the first ones); None for all.
        skip_extensions: Path extensions (lower case, no dot) whose links are left out.
        encoding: The page's character encoding (``FetchResult.encoding``); None for UTF-8.

    Returns:
        Absolute http(s) URLs in the form `crawlq.urls.normalize` returns, each once,
        in the order of their first occurrence.
    """
    return list(scan_page(tree, base_url).links(skip_extensions, limit, encoding).urls)
