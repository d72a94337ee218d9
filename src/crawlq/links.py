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
tells which links are all marked ``rel="nofollow"``, and counts those skipped for their
extension. Whether a link is *followed* (nofollow, domains, depth, robots.txt) is decided
later, by the spider (`crawlq.spider.Response.follow_all`) and the engine.

It runs for every fetched page, so the per-link path avoids work it can skip: absolute and
simple relative hrefs are resolved by string concatenation instead of the URL parser, repeated
hrefs are dropped before normalisation, and normalisation results are kept in a small
bounded LRU cache shared by all pages (navigation links repeat from page to page).

Hostile pages are bounded before lexbor sees them. `html_depth_over` estimates how deeply the
elements of a document nest (lexbor's parse time grows with the square of the depth: 25,000
nested ``<div>`` take seconds, 150,000 minutes), and `cut_at_links` cuts a document with more
link tags than a cap just before the first one over it, so that neither its tree nor its links
grow with the page (a tree costs lexbor about 650 bytes per element).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from urllib.parse import urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawlq.errors import InvalidURL
from crawlq.scope import MAX_URL_LENGTH
from crawlq.settings import DEFAULT_SKIP_EXTENSIONS, Settings
from crawlq.urls import encode_query, query_codec, resolve, url_keys

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

IGNORED_EXTENSIONS: frozenset[str] = frozenset(DEFAULT_SKIP_EXTENSIONS)
"""Path extensions (lower case, no dot) that `extract_links` leaves out by default: the
default of the ``skip_extensions`` setting (`crawlq.settings.DEFAULT_SKIP_EXTENSIONS`)."""

# The document base URL is the first <base href> in tree order, wherever the links are.
_BASE_SELECTOR = "base[href]"
_TITLE_SELECTOR = "title:not(svg *)"  # the HTML <title>, not an SVG image's <title>
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
_NORMALIZE_CACHE_SIZE = 4096
_PLAIN_PATH_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/%!$&'()*+,=@"
)  # path characters that need no URL parser: no "?", ";", "#", ":" or "\\"


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


# -- what a page says: links, base, meta refresh, canonical, meta robots ---------------------


@dataclass(frozen=True, slots=True)
class Refresh:
    """A declarative refresh that a crawler can follow.

    Attributes:
        delay_s: Seconds the page asks to wait before the refresh (whole seconds; the
            standard ignores a fraction).
        url: The absolute http(s) target in `crawlq.urls.normalize` form, or None when the
            refresh reloads the document itself (no ``url=``, or one naming the page).
    """

    delay_s: int
    url: str | None


@dataclass(frozen=True, slots=True)
class PageLinks:
    """The crawlable links of a page (`PageScan.links`).

    Attributes:
        urls: Absolute, normalised http(s) URLs, each once, in document order.
        nofollow: Those of ``urls`` whose every ``<a>``/``<area>`` has ``nofollow`` among its
            ``rel`` tokens (a URL also linked without it is not in here).
        skipped_extension: Distinct links left out for their path extension.
    """

    urls: tuple[str, ...]
    nofollow: frozenset[str]
    skipped_extension: int


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


_ROBOTS_NOFOLLOW = frozenset({"nofollow", "none"})


class PageScan:
    """What an HTML document says about itself, from one walk of its tree (`scan_page`).

    Attributes:
        base: The document base URL: the first ``<base href>`` resolved against the page URL
            when it is an http(s) URL, else the page URL.
        refresh: The first ``<meta http-equiv="refresh">`` whose content parses
            (`parse_refresh`) and whose target is an http(s) URL (of a content at most
            `crawlq.scope.MAX_URL_LENGTH` + 100 characters long), or None. Its target is
            resolved against `base`.
        canonical_url: The first ``<link rel="canonical" href>`` that is an http(s) URL of
            at most `crawlq.scope.MAX_URL_LENGTH` characters, resolved against `base` and
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

    def links(
        self,
        skip_extensions: frozenset[str] = IGNORED_EXTENSIONS,
        limit: int | None = None,
        encoding: str | None = None,
    ) -> PageLinks:
        """Return the crawlable links of the page (the rules of `extract_links`).

        Args:
            skip_extensions: Path extensions (lower case, no dot) whose links are left out
                and counted.
            limit: Most links returned (the first ones); None for all.
            encoding: The page's character encoding, for the queries of its links; None
                for UTF-8.
        """
        query_encoding = query_codec(encoding)
        base = _Base(self.base)
        seen_raw: dict[str, str | None] = {}  # resolved href -> its URL (None: not a link)
        seen: set[str] = set()
        urls: list[str] = []
        nofollow: set[str] = set()
        skipped = 0
        for node in self._anchors:
            attrs = node.attributes  # one call for href and rel: cheaper than two lookups
            href = attrs.get("href")
            if not href:
                continue
            if query_encoding is not None:  # a page in another encoding than UTF-8
                href = encode_query(href, query_encoding)
            raw = base.resolve(href)
            if raw is None:
                continue
            rel = attrs.get("rel")
            marked = rel is not None and "nofollow" in rel.lower().split()
            if raw in seen_raw:
                known = seen_raw[raw]
                if not marked and known is not None:
                    nofollow.discard(known)
                continue
            if skip_extensions and _has_extension(raw, skip_extensions):
                seen_raw[raw] = None
                skipped += 1
                continue
            url = seen_raw[raw] = _normalize_or_none(raw)
            if url is None:
                continue
            if url in seen:
                if not marked:
                    nofollow.discard(url)
                continue
            seen.add(url)
            urls.append(url)
            if marked:
                nofollow.add(url)
            if len(urls) == limit:
                break
        return PageLinks(tuple(urls), frozenset(nofollow), skipped)


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
    base = page_url if base_href is None else _resolve_base(base_href, page_url)
    refresh = canonical = None
    if refreshes or canonicals:  # a few pages in a crawl
        resolver = _Base(base)
        for content in refreshes:
            refresh = _refresh_of(content, resolver, base, page_url)
            if refresh is not None:
                break
        for href in canonicals:
            raw = resolver.resolve(href) if len(href) <= MAX_URL_LENGTH else None
            canonical = None if raw is None else _normalize_or_none(raw)
            if canonical is not None:
                break
    robots.discard("")
    return PageScan(anchors, base, refresh, canonical, frozenset(robots))


def _refresh_of(content: str, resolver: _Base, base: str, page_url: str) -> Refresh | None:
    """The `Refresh` of one content attribute, or None when it is not one to follow.

    The target is parsed relative to the document base (step 11.11 of the shared declarative
    refresh steps); an empty or fragment-only target names the base itself. A target that is
    not an http(s) URL is passed over, as the standard does for ``javascript:``, so a later
    ``<meta>`` may still count.
    """
    if len(content) > MAX_URL_LENGTH + 100:
        return None  # a URL longer than any followed (`crawlq.scope`)
    parsed = parse_refresh(content)
    if parsed is None:
        return None
    delay_s, url_string = parsed
    if url_string is None:
        return Refresh(delay_s, None)
    stripped = url_string.strip()
    raw = base.partition("#")[0] if not stripped or stripped[0] == "#" else None
    if raw is None:
        raw = resolver.resolve(stripped)
    target = None if raw is None else _normalize_or_none(raw)
    if target is None:
        return None
    same = _normalize_or_none(page_url)
    if same is not None and url_keys(target).canonical == url_keys(same).canonical:
        return Refresh(delay_s, None)
    return Refresh(delay_s, target)


_ASCII_WHITESPACE = "\t\n\f\r "
_WHITESPACE_RUN = re.compile(r"[\t\n\f\r ]*")  # Infra's ASCII whitespace (no \v)
_DIGITS_RUN = re.compile(r"[0-9]*")
_DIGITS_AND_DOTS_RUN = re.compile(r"[0-9.]*")
_DELAY_DIGITS = 12


def parse_refresh(content: str) -> tuple[int, str | None] | None:
    r"""Parse a refresh value: ``<meta http-equiv="refresh" content>`` or a ``Refresh`` header.

    The rules are steps 2 to 11.10 of the HTML Standard's "shared declarative refresh steps"
    (https://html.spec.whatwg.org/multipage/semantics.html#shared-declarative-refresh-steps):
    ASCII whitespace first; the delay, digits whose fraction (``"1.5"``) is ignored, or only
    a fraction (``".5"``: 0); then ``;``, ``,`` or whitespace; then the URL, optionally
    after ``url`` and ``=`` (any case, whitespace around ``=``), optionally in quotes (the
    URL ends at the matching quote). Whitespace includes newlines, so
    ``"0;\n  URL = 'next.html'"`` is a refresh to ``next.html``. A value the steps give up
    on (``"soon"``, ``"5x"``, ``""``) is None. The URL is not resolved here: the caller
    parses it relative to the document base (step 11.11, `scan_page`).

    Args:
        content: The attribute or header value.

    Returns:
        ``(delay_s, url_string)``: the delay in whole seconds, and the URL text (None when
        there is none: the document refreshes itself); None when the value is not a refresh.
    """
    end = len(content)
    pos = _skip_whitespace(content, 0)  # steps 2-3
    start = pos
    pos = _DIGITS_RUN.match(content, pos).end()  # type: ignore[union-attr]  # step 5
    if pos == start:
        if pos >= end or content[pos] != ".":  # step 6
            return None
        delay_s = 0
    else:
        # step 7; a longer run of digits (a hostile page) is a delay past any limit, and
        # would exceed int()'s digit cap
        delay_s = int(content[start:pos]) if pos - start <= _DELAY_DIGITS else 10**_DELAY_DIGITS
    pos = _DIGITS_AND_DOTS_RUN.match(content, pos).end()  # type: ignore[union-attr]  # step 8
    if pos < end:  # step 10
        if content[pos] not in ";," and content[pos] not in _ASCII_WHITESPACE:
            return None
        pos = _skip_whitespace(content, pos)
        if pos < end and content[pos] in ";,":
            pos += 1
        pos = _skip_whitespace(content, pos)
    if pos >= end:  # step 11: nothing left, the document itself
        return delay_s, None
    url_start = pos  # 11.1: without "url=", the URL is the rest as it is
    skip_quotes = True
    if content[pos] in "Uu":  # 11.2
        pos += 1
        skip_quotes = False  # 11.3-11.6 jump to "parse" when "url =" is not complete
        if pos < end and content[pos] in "Rr":
            pos += 1
            if pos < end and content[pos] in "Ll":
                pos = _skip_whitespace(content, pos + 1)  # 11.5
                if pos < end and content[pos] == "=":  # 11.6
                    pos = _skip_whitespace(content, pos + 1)  # 11.7
                    skip_quotes = True
    if not skip_quotes:
        return delay_s, content[url_start:]  # "parse" with the urlString of 11.1
    quote = content[pos] if pos < end and content[pos] in "'\"" else ""  # 11.8
    if quote:
        pos += 1
    url = content[pos:]  # 11.9
    if quote:
        url = url.partition(quote)[0]  # 11.10
    return delay_s, url


def _skip_whitespace(text: str, pos: int) -> int:
    return _WHITESPACE_RUN.match(text, pos).end()  # type: ignore[union-attr]  # matches ""


# -- hostile documents -----------------------------------------------------------------------


def _tags(names: str) -> frozenset[str]:
    return frozenset(names.split())


_VOID = _tags(
    "area base basefont bgsound br col embed frame hr image img input keygen link meta param "
    "source track wbr"
)
_OPTIONAL_END = _tags(
    "p li dt dd option optgroup tr td th thead tbody tfoot caption colgroup rb rt rtc rp "
    "html head body"
)
"""Elements whose start tag a later tag closes implicitly: not counted as a level (a level
of nesting always needs another element: a list, a table, a ``<dl>``)."""
_NOT_NESTING = _VOID | _OPTIONAL_END
_RAW_TEXT = _tags("script style textarea title xmp iframe noembed noframes noscript")
_SPECIAL = _tags(
    "address applet article aside blockquote button center details dialog dir div dl "
    "fieldset figcaption figure footer form frameset h1 h2 h3 h4 h5 h6 header hgroup listing "
    "main marquee menu nav object ol pre search section select summary table template ul "
    "math svg"
)
"""Elements an end tag of an inline element does not close across (the HTML Standard's
"special" category, less the ones not counted as levels)."""
_HEADINGS = _tags("h1 h2 h3 h4 h5 h6")
_NO_SELF_NESTING = _tags("a nobr button form select")
"""Elements whose start tag closes an open one of the same name (a ``<form>`` inside a form
is ignored instead; the same count)."""
_END_SEARCH = 32
"""Open elements an end tag looks through for its own: beyond, it is taken as a stray end
tag (the estimate only errs deeper)."""
_SCAN_CHUNK = 2048
DEPTH_CHECK_MIN_TAGS = 2048
"""`screen_html` checks the depth of documents with more ``<`` than this only (2,048 nested
``<div>``, the worst case, take lexbor ~15 ms)."""
_TOKEN = re.compile(r"<!--.*?(?:-->|\Z)|<[!?][^>]*|<(/?)([A-Za-z][^\t\n\f\r />]*)([^>]*)", re.S)
_LINK_TAG = re.compile(r"<a(?:rea)?[\t\n\f\r />]", re.I)


@dataclass(frozen=True, slots=True)
class Screened:
    """What `screen_html` found in a document before it is parsed.

    Attributes:
        markup: The text to parse: the document, or its start when it has more link tags
            than the cap.
        link_tags: ``<a>`` and ``<area>`` tags in the whole document when it was cut, else 0
            (not counted).
        too_deep: None when the markup nests at most the depth cap, else the depth at which
            the scan stopped (cap + 1).
    """

    markup: str
    link_tags: int = 0
    too_deep: int | None = None


def screen_html(text: str, max_depth: int, max_links: int, *, tags: int | None = None) -> Screened:
    """Bound a document before lexbor parses it: cut it at ``max_links`` link tags, check depth.

    One ``str.count("<")`` settles both for most pages: a document with at most ``max_links``
    ``<`` has no more link tags, and one with at most `DEPTH_CHECK_MIN_TAGS` (or
    ``max_depth``, if more) is not checked for depth: it cannot nest deeper than its count of
    ``<``, and lexbor parses even that in ~15 ms, so the check would cost more than it saves.

    Args:
        text: The decoded document.
        max_depth: Most nested elements allowed (`html_depth_over`).
        max_links: Most ``<a>``/``<area>`` tags parsed (`cut_at_links`).
        tags: ``text.count("<")`` when the caller has it.

    Returns:
        The markup to parse, and what was found.
    """
    if tags is None:
        tags = text.count("<")
    markup, link_tags = (text, 0) if tags <= max_links else cut_at_links(text, max_links)
    if markup is not text:
        tags = markup.count("<")
    if tags <= max(max_depth, DEPTH_CHECK_MIN_TAGS) or not _may_exceed(markup, max_depth):
        return Screened(markup, link_tags)
    return Screened(markup, link_tags, _tokenised_depth_over(markup, max_depth))


def html_depth_over(text: str, limit: int) -> int | None:
    """Tell whether the elements of an HTML document nest more than ``limit`` levels deep.

    Cheap for ordinary pages: a document with at most ``limit`` ``<`` cannot be deeper and is
    not scanned; otherwise a count of start and end tags by chunks of the text (`str.count`)
    bounds the depth, and only a document that this bound does not clear is tokenised: a
    stack of open elements, kept the way the HTML tree builder keeps it in outline (void
    elements and elements with optional end tags such as ``<p>``, ``<li>``, ``<td>`` are not
    levels; comments and the text of ``<script>``, ``<style>``, ``<textarea>`` are skipped;
    an end tag closes its element and the ones opened inside it, unless a block element
    stands between; ``/>`` closes only inside SVG and MathML).

    It is an estimate of the tree builder, not the tree builder: a document crafted to
    mislead the chunk count (end tags that the parser ignores, or hidden in a comment or a
    script) can pass, and the engine's per-page time budget is then what bounds the parse.

    Args:
        text: The decoded document.
        limit: Most nested elements allowed.

    Returns:
        None when the document nests at most ``limit`` deep, else the depth at which the
        scan stopped (``limit + 1``).
    """
    if text.count("<") <= limit or not _may_exceed(text, limit):
        return None
    return _tokenised_depth_over(text, limit)


def _may_exceed(text: str, limit: int) -> bool:
    """False when start tags minus end tags never pass ``limit`` in any chunk of the text.

    Start tags are counted as every ``<`` (an over-count), end tags as ``</``: a chunk's
    start tags added to the level at its start bound every level inside it. Voids and
    unclosed ``<p>`` raise the level, so an untidy page can fail this and is tokenised.
    """
    level = 0
    for start in range(0, len(text), _SCAN_CHUNK):
        end = start + _SCAN_CHUNK
        opens = text.count("<", start, end)
        closes = text.count("</", start, end)
        if level + opens - closes > limit:
            return True
        level = max(0, level + opens - 2 * closes)
    return False


def _tokenised_depth_over(text: str, limit: int) -> int | None:
    stack: list[str] = []
    raw: str | None = None  # inside <script> and the like: only its end tag counts
    foreign = 0  # open <svg> and <math>: "/>" closes their children
    for slash, tag, rest in _TOKEN.findall(text):
        if not tag:
            continue  # comment, doctype, processing instruction
        name = tag.lower()
        if raw is not None:
            if slash and name == raw:
                raw = None
            continue
        if name in _NOT_NESTING:
            continue
        if slash:
            _close(stack, name)
            if foreign and name in ("svg", "math") and name not in stack:
                foreign -= 1
            continue
        if name in _RAW_TEXT:
            raw = name
            continue
        if name == "plaintext":
            break  # the rest of the document is text
        if foreign and rest.endswith("/"):
            continue
        if name in _HEADINGS and stack and stack[-1] in _HEADINGS:
            stack.pop()
        elif name in _NO_SELF_NESTING and name in stack[-_END_SEARCH:]:
            _close(stack, name)
        stack.append(name)
        if name in ("svg", "math"):
            foreign += 1
        if len(stack) > limit:
            return len(stack)
    return None


def _close(stack: list[str], name: str) -> None:
    """Pop ``name`` and what was opened after it, if it is open within reach."""
    inline = name not in _SPECIAL
    for i in range(len(stack) - 1, max(-1, len(stack) - 1 - _END_SEARCH), -1):
        open_name = stack[i]
        if open_name == name:
            del stack[i:]
            return
        if inline and open_name in _SPECIAL:
            return  # an inline end tag does not close across a block: ignored


def cut_at_links(text: str, limit: int) -> tuple[str, int]:
    """Cut a document with more than ``limit`` link tags just before the one over the cap.

    Args:
        text: The decoded document.
        limit: Most ``<a>`` and ``<area>`` tags kept.

    Returns:
        ``(text, 0)`` when the document has at most ``limit`` link tags (not counted: every
        one starts with ``<a`` or ``<A``, and those are counted with `str.count`),
        else ``(the text before the first tag over the cap, the number of link tags)``.
    """
    if text.count("<a") + text.count("<A") <= limit:
        return text, 0  # every link tag is at least "<a>" and starts with "<a" or "<A"
    tags = _LINK_TAG.finditer(text)
    over = next(islice(tags, limit, None), None)
    if over is None:
        return text, 0
    return text[: over.start()], limit + 1 + sum(1 for _ in tags)


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
    return page_url if node is None else _resolve_base(node.attrs.sget("href"), page_url)


def _resolve_base(base_href: str, page_url: str) -> str:
    href = base_href.strip()
    if not href:
        return page_url
    try:
        resolved = resolve(href, page_url)
    except InvalidURL:
        return page_url
    return resolved if resolved[:5].lower() in ("http:", "https") else page_url


class _Base:
    """A base URL split once per page, so resolving most hrefs is a concatenation."""

    __slots__ = ("dir", "dir_segments", "origin", "url")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        path = parts.path or "/"
        self.url = url
        self.origin = f"{parts.scheme}://{parts.netloc}"
        # Everything up to the last "/" of the path: "sibling.html" is appended to it.
        self.dir = self.origin + path[: path.rfind("/") + 1]
        self.dir_segments = path[: path.rfind("/")].split("/")  # "/a/b/c" -> ["", "a", "b"]

    def resolve(self, href: str) -> str | None:
        """Return ``href`` made absolute without its fragment, or None to skip it.

        Resolution is the WHATWG URL Standard's, as browsers do it (`crawlq.urls.resolve`).
        Only hrefs that it would change in other ways than concatenation (dot segments, also
        percent-encoded ones, a query-only or scheme-relative reference, ``http:`` without
        ``//``, control characters, spaces, backslashes) go through it; the rest are joined
        as strings. An href it refuses (``http://`` with no host) is skipped.
        """
        href = href.strip()
        hash_at = href.find("#")
        if hash_at >= 0:
            href = href[:hash_at]
        if not href:
            return None  # empty or fragment-only: the page itself
        clean = href.isprintable() and " " not in href and "\\" not in href
        colon = href.find(":")
        if colon > 0 and _SCHEME_CHARS.issuperset(href[:colon]):
            scheme = href[:colon].lower()
            if scheme != "http" and scheme != "https":
                return None  # javascript:, mailto:, tel:, data:, ftp:, …
            if clean and href.startswith("//", colon + 1):
                return href  # absolute
            return self._parsed(href)
        first = href[0]
        if not clean or first == "?" or href.startswith("//"):
            return self._parsed(href)  # query-only and scheme-relative: rare
        if "%" in href and ("%2e" in href or "%2E" in href):
            return self._parsed(href)  # "%2e%2e/" is a dot segment too
        if first == "." or "/." in href:
            if _PLAIN_PATH_CHARS.issuperset(href):
                return self.origin + _remove_dot_segments(self.dir_segments, href)
            return self._parsed(href)
        if first == "/":
            return self.origin + href  # "/path/page.html"
        return self.dir + href  # "page.html", "dir/page.html?x=1"

    def _parsed(self, href: str) -> str | None:
        try:
            return resolve(href, self.url)
        except InvalidURL:
            return None


def _remove_dot_segments(base_segments: list[str], href: str) -> str:
    """The path of `crawlq.urls.resolve` ``(href, base)`` for a plain path ``href`` with dots.

    Follows the WHATWG URL Standard's path state (§4.4) step by step, without its parsing:
    ``href`` has no query, fragment, scheme, backslash or percent-encoded dot
    (`_PLAIN_PATH_CHARS`); ``base_segments`` are the base's directory segments. Empty
    segments are kept, as browsers keep them.
    """
    segments = href.split("/") if href[0] == "/" else base_segments + href.split("/")
    resolved: list[str] = []
    for segment in segments:
        if segment == "..":
            if len(resolved) > 1:
                resolved.pop()
        elif segment != ".":
            resolved.append(segment)
    if segments[-1] in (".", ".."):
        resolved.append("")
    path = "/".join(resolved)
    return path if path[:1] == "/" else "/" + path


def _has_extension(url: str, extensions: frozenset[str]) -> bool:
    """True when the path of an absolute http(s) ``url`` ends in one of ``extensions``."""
    head = url.partition("?")[0]
    before_slash, _, segment = head.rpartition("/")
    _, dot, ext = segment.rpartition(".")
    # len("https:/") == 7: a shorter prefix means the last "/" belongs to "//", not the path.
    return bool(dot) and len(before_slash) > 7 and ext.lower() in extensions


@lru_cache(maxsize=_NORMALIZE_CACHE_SIZE)
def _normalize_or_none(url: str) -> str | None:
    try:
        return url_keys(url).url  # warms the cache that CrawlRequest(url) reads next
    except InvalidURL:
        return None
