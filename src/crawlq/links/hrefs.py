"""Resolving the hrefs of one page against its base URL, fast: `HrefResolver`.

It runs for every link of every fetched page, so it avoids the URL parser where it can:
absolute and simple relative hrefs are joined as strings, and only hrefs the WHATWG URL
Standard would change in other ways (dot segments, backslashes, a query-only reference…) go
through `crawlq.urls.resolve`. `normalize_or_none` keeps its results in a small bounded LRU
cache shared by all pages (navigation links repeat from page to page); `has_extension` tells
an asset URL (``skip_extensions``) from a page.
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit

from crawlq.errors import InvalidURL
from crawlq.urls import resolve, url_keys

__all__ = ["HrefResolver", "has_extension", "normalize_or_none"]

_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
_NORMALIZE_CACHE_SIZE = 4096
_PLAIN_PATH_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/%!$&'()*+,=@"
)  # path characters that need no URL parser: no "?", ";", "#", ":" or "\\"


class HrefResolver:
    """A base URL split once per page, so resolving most hrefs is a concatenation."""

    __slots__ = ("base_url", "directory", "directory_segments", "origin")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        path = parts.path or "/"
        self.base_url = url
        self.origin = f"{parts.scheme}://{parts.netloc}"
        # Everything up to the last "/" of the path: "sibling.html" is appended to it.
        self.directory = self.origin + path[: path.rfind("/") + 1]
        self.directory_segments = path[: path.rfind("/")].split("/")  # "/a/b/c" -> ["", "a", "b"]

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
                return self.origin + _remove_dot_segments(self.directory_segments, href)
            return self._parsed(href)
        if first == "/":
            return self.origin + href  # "/path/page.html"
        return self.directory + href  # "page.html", "dir/page.html?x=1"

    def _parsed(self, href: str) -> str | None:
        try:
            return resolve(href, self.base_url)
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


def has_extension(url: str, extensions: frozenset[str]) -> bool:
    """True when the path of an absolute http(s) ``url`` ends in one of ``extensions``."""
    head = url.partition("?")[0]
    before_slash, _, segment = head.rpartition("/")
    _, dot, ext = segment.rpartition(".")
    # len("https:/") == 7: a shorter prefix means the last "/" belongs to "//", not the path.
    return bool(dot) and len(before_slash) > 7 and ext.lower() in extensions


@lru_cache(maxsize=_NORMALIZE_CACHE_SIZE)
def normalize_or_none(url: str) -> str | None:
    """``url`` in `crawlq.urls.normalize` form, or None when it cannot be crawled (cached)."""
    try:
        return url_keys(url).url  # warms the cache that CrawlRequest(url) reads next
    except InvalidURL:
        return None
