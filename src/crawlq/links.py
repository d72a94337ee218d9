"""Link and title extraction from HTML with selectolax (lexbor). No scope logic lives here.

A page is parsed once with `parse_html`; the tree is shared by `extract_links`,
`extract_title` and the spider's `crawlq.spider.Response.tree`.

`extract_links` returns the crawlable page links of a document: the ``href`` of every
``<a>`` and ``<area>``, resolved against the first ``<base href>`` (itself resolved against
the page URL), fragments dropped, non-http(s) schemes and asset URLs (`IGNORED_EXTENSIONS`)
skipped, each URL normalised with `crawlq.urls.normalize`, duplicates removed in
first-seen order. Whether a link is *followed* (domains, depth, robots.txt) is decided later
by the engine.

It runs for every fetched page, so the per-link path avoids work it can skip: absolute and
simple relative hrefs are resolved by string concatenation instead of ``urljoin``, repeated
hrefs are dropped before normalisation, and normalisation results are kept in a small
bounded LRU cache shared by all pages (navigation links repeat from page to page).
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

from crawlq.errors import InvalidURL
from crawlq.urls import url_keys

__all__ = ["IGNORED_EXTENSIONS", "document_base", "extract_links", "extract_title", "parse_html"]

IGNORED_EXTENSIONS: frozenset[str] = frozenset(
    {
        # images
        "ai", "avif", "bmp", "cr2", "eps", "gif", "heic", "heif", "ico", "jfif", "jpe",
        "jpeg", "jpg", "nef", "png", "psd", "raw", "svg", "svgz", "tif", "tiff", "webp",
        # audio
        "aac", "aif", "aiff", "amr", "flac", "m4a", "mid", "midi", "mka", "mp3", "oga",
        "ogg", "opus", "ra", "wav", "weba", "wma",
        # video
        "3g2", "3gp", "asf", "avi", "flv", "m2ts", "m4v", "mkv", "mov", "mp4", "mpeg",
        "mpg", "mts", "ogv", "qt", "rm", "swf", "ts", "vob", "webm", "wmv",
        # styles, scripts, source maps, fonts
        "css", "js", "map", "mjs", "eot", "otf", "ttf", "woff", "woff2",
        # archives, packages, disk images, binaries
        "7z", "apk", "bin", "bz2", "cab", "deb", "dll", "dmg", "exe", "gz", "img", "iso",
        "jar", "lz", "lzma", "msi", "rar", "rpm", "so", "tar", "tbz", "tbz2", "tgz", "txz",
        "war", "whl", "xz", "z", "zip", "zst",
        # office documents, e-books, PDF
        "doc", "docm", "docx", "epub", "key", "mobi", "numbers", "odg", "odp", "ods",
        "odt", "pages", "pdf", "pps", "ppsx", "ppt", "pptm", "pptx", "ps", "rtf", "xls",
        "xlsm", "xlsx",
    }
)  # fmt: skip
"""Path extensions (lower case, no dot) of links that are never crawled as pages."""

# The document base URL is the first <base href> in tree order, wherever the links are.
_LINK_OR_BASE_SELECTOR = "a[href], area[href], base[href]"
_BASE_SELECTOR = "base[href]"
_TITLE_SELECTOR = "title:not(svg *)"  # the HTML <title>, not an SVG image's <title>
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
_NORMALIZE_CACHE_SIZE = 4096
_PLAIN_PATH_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/%!$&'()*+,=@"
)  # path characters that need no parsing by urljoin: no "?", ";", "#" or ":"


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


def extract_links(tree: LexborHTMLParser, base_url: str) -> list[str]:
    """Return the crawlable links of a page, normalised, de-duplicated, in document order.

    Takes the ``href`` of every ``<a>`` and ``<area>``. Relative links are resolved against
    the first ``<base href>`` (resolved against ``base_url``; ignored when it is not an
    http(s) URL) or else ``base_url``. Skipped silently: empty and fragment-only hrefs,
    ``javascript:``, ``mailto:``, ``tel:``, ``data:``, ``ftp:`` and every other non-http(s)
    scheme, paths ending in one of `IGNORED_EXTENSIONS`, and URLs that
    `crawlq.urls.normalize` rejects. Fragments are dropped.

    Args:
        tree: A tree from `parse_html`.
        base_url: The absolute http(s) URL the document was served from (after redirects).

    Returns:
        Absolute http(s) URLs in the form `crawlq.urls.normalize` returns, each once,
        in the order of their first occurrence.
    """
    nodes = tree.css(_LINK_OR_BASE_SELECTOR)  # one tree walk, document order
    base_href = next((n.attrs.sget("href") for n in nodes if n.tag == "base"), None)
    base = _Base(base_url if base_href is None else _resolve_base(base_href, base_url))
    seen_raw: set[str] = set()
    seen: set[str] = set()
    links: list[str] = []
    for node in nodes:
        href = node.attrs.sget("href")
        if not href or node.tag == "base":
            continue
        raw = base.resolve(href)
        if raw is None or raw in seen_raw:
            continue
        seen_raw.add(raw)
        if _has_ignored_extension(raw):
            continue
        url = _normalize_or_none(raw)
        if url is None or url in seen:
            continue
        seen.add(url)
        links.append(url)
    return links


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
    resolved = urljoin(page_url, href)
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

        Only hrefs that `urljoin` would change in other ways than concatenation (dot
        segments, a query-only or protocol-relative reference, control characters, spaces,
        backslashes) go through `urljoin`; the rest are joined as strings.
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
            return urljoin(self.url, href)
        first = href[0]
        if not clean or first == "?" or href.startswith("//"):
            return urljoin(self.url, href)  # query-only and protocol-relative: rare
        if first == "." or "/." in href:
            if _PLAIN_PATH_CHARS.issuperset(href):
                return self.origin + _remove_dot_segments(self.dir_segments, href)
            return urljoin(self.url, href)
        if first == "/":
            return self.origin + href  # "/path/page.html"
        return self.dir + href  # "page.html", "dir/page.html?x=1"


def _remove_dot_segments(base_segments: list[str], href: str) -> str:
    """The path of ``urljoin(base, href)`` for a plain path ``href`` with dot segments.

    Follows `urllib.parse.urljoin` (RFC 3986 §5.2.2 and §5.2.4, with its habit of dropping
    empty segments of a relative path) step by step, without its parsing: ``href`` has no
    query, parameters, fragment or scheme (`_PLAIN_PATH_CHARS`).
    """
    if href[0] == "/":
        segments = href.split("/")
    else:
        segments = base_segments + href.split("/")
        segments[1:-1] = [s for s in segments[1:-1] if s]
    resolved: list[str] = []
    for segment in segments:
        if segment == "..":
            if resolved:
                resolved.pop()
        elif segment != ".":
            resolved.append(segment)
    if segments[-1] in (".", ".."):
        resolved.append("")
    path = "/".join(resolved)
    return path if path[:1] == "/" else "/" + path  # as urlunsplit does after a host


def _has_ignored_extension(url: str) -> bool:
    """True when the path of an absolute http(s) ``url`` ends in an ignored extension."""
    head = url.partition("?")[0]
    before_slash, _, segment = head.rpartition("/")
    _, dot, ext = segment.rpartition(".")
    # len("https:/") == 7: a shorter prefix means the last "/" belongs to "//", not the path.
    return bool(dot) and len(before_slash) > 7 and ext.lower() in IGNORED_EXTENSIONS


@lru_cache(maxsize=_NORMALIZE_CACHE_SIZE)
def _normalize_or_none(url: str) -> str | None:
    try:
        return url_keys(url).url  # warms the cache that CrawlRequest(url) reads next
    except InvalidURL:
        return None
