"""Relative references resolved as browsers resolve them, and the encodings a URL is sent in.

Relative references (links, ``Location`` headers) are resolved by the WHATWG URL Standard's
basic URL parser, as browsers resolve them (`resolve`, through the ada library): for the
special schemes http and https a backslash counts as a slash, any run of slashes after the
scheme starts the authority (``///host/path``), ``http:path`` is relative to an http base
and names a host under any other base, tabs and newlines are removed and leading and
trailing spaces and controls stripped. The query of a link is percent-encoded in the page's
encoding, its path in UTF-8 (`encode_query`, WHATWG URL "query state"), and a ``Location``
header keeps its bytes (`decode_location`). Pure functions, no I/O; errors are `InvalidURL`.

The hrefs of a page are resolved for every link of every fetched page, so `HrefResolver`
avoids the URL parser where it can: absolute and simple relative hrefs are joined as strings,
and only hrefs the URL Standard would change in other ways (dot segments, backslashes, a
query-only reference…) go through `resolve`. `has_extension` tells an asset URL
(``skip_extensions``) from a page.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from functools import lru_cache
from urllib.parse import urlsplit

from crawlq.errors import InvalidURL

__all__ = [
    "HrefResolver",
    "decode_location",
    "encode_query",
    "has_extension",
    "query_codec",
    "resolve",
]

_join: Callable[[str, str], str] | None = None


def resolve(ref: str, base: str) -> str:
    r"""Resolve ``ref`` against ``base`` with the WHATWG URL Standard's basic URL parser.

    This is how browsers resolve a link or a ``Location`` (URL Standard §4.4, "basic URL
    parser"; implemented by the ada library): leading and trailing C0 controls and spaces are
    stripped and tabs and newlines removed anywhere; for http and https a ``\`` counts as a
    ``/`` before the query; any run of slashes and backslashes after a special scheme or at
    the start of a reference begins the authority (``///host/p`` -> ``http://host/p``);
    ``http:p`` is a relative path under an http base and ``http://p`` under any other base;
    dot segments (also ``%2e``) are removed; the host is IDNA-mapped, IPv4 numbers in any
    notation (``0x7f.1``) are made dotted-decimal; non-ASCII in the path and query is
    percent-encoded as UTF-8 (a page in another encoding encodes its query first:
    `encode_query`).

    Args:
        ref: A URL or relative reference, e.g. an ``href`` or a ``Location`` value.
        base: An absolute URL.

    Returns:
        The absolute URL, serialised (the fragment kept; `normalize` drops it). Any scheme.

    Raises:
        InvalidURL: The parser fails (no host after ``http://``, a bad port or IPv6 address,
            lone surrogates); the message names ``ref``.
    """
    global _join
    if _join is None:
        from ada_url import join_url  # ~10 ms to load: only when a reference needs it

        _join = join_url
    try:
        return _join(base, ref)
    except ValueError as exc:  # UnicodeEncodeError (surrogates) is a ValueError too
        raise InvalidURL(ref, f"cannot be resolved against {base}") from exc


@lru_cache(maxsize=64)
def query_codec(encoding: str | None) -> str | None:
    """The codec the queries of a page's links are encoded in, or None for UTF-8.

    WHATWG Encoding "get an output encoding": UTF-16BE/LE (and the replacement encoding)
    give UTF-8; so does an encoding Python does not know, and None.

    Args:
        encoding: The page's character encoding (a Python codec name or label).
    """
    if encoding is None:
        return None
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return None
    if name in ("utf-8", "utf-8-sig") or name.startswith(("utf-16", "utf-32")):
        return None
    return name


def encode_query(url: str, encoding: str | None) -> str:
    """Percent-encode the non-ASCII characters of ``url``'s query in the page's ``encoding``.

    A browser encodes the query of a link in the encoding of the document it is on, and its
    path in UTF-8 (WHATWG URL Standard §4.4, "query state": *percent-encode after encoding*
    with the URL's query encoding, the document's encoding; HTML §2.4.2 "encoding-parsing a
    URL"): on a windows-1252 page ``?q=crème`` requests ``?q=cr%E8me``. A character the
    encoding cannot represent becomes its decimal HTML character reference, percent-encoded
    (``%26%2320013%3B`` for U+4E2D), as the Standard says. Everything else is left as it is
    (`normalize` encodes the rest), so this is cheap to call on every link: an ASCII URL, or
    a UTF-8 (or UTF-16) page, returns ``url`` itself.

    Args:
        url: An absolute URL or a relative reference; its query runs from the first ``?``
            to the first ``#`` after it.
        encoding: The page's character encoding (a Python codec name, such as
            `crawlq.web.decode.decode_body` gives), or None for UTF-8.

    Returns:
        ``url`` with its query's non-ASCII characters percent-encoded, or ``url`` unchanged.
    """
    if encoding is None or url.isascii():
        return url
    codec = query_codec(encoding)
    if codec is None:
        return url
    start = url.find("?")
    if start < 0:
        return url
    end = url.find("#", start)
    end = len(url) if end < 0 else end
    query = url[start + 1 : end]
    if query.isascii():
        return url
    out: list[str] = []
    for char in query:
        if char < "\x80":
            out.append(char)
            continue
        try:
            data = char.encode(codec)
        except UnicodeEncodeError:  # also lone surrogates
            out.append(f"%26%23{ord(char)}%3B")
            continue
        out.append("".join(f"%{byte:02X}" for byte in data))
    return f"{url[: start + 1]}{''.join(out)}{url[end:]}"


def decode_location(raw: bytes) -> str:
    r"""The text of a ``Location`` header value as browsers take it: bytes kept as bytes.

    HTTP gives a field value as bytes (RFC 9110 §5.5: octets beyond ASCII are ``obs-text``,
    opaque data). Browsers percent-encode each non-ASCII byte of a ``Location`` as it is, and
    resolve the result (web-platform-tests ``fetch/api/redirect/
    redirect-location-escape.tentative.any.js``, from whatwg/fetch#883): a raw UTF-8
    ``/café`` requests ``/caf%C3%A9``, a latin-1 ``/caf\xe9`` requests ``/caf%E9``, a stray
    ``\xff`` ``%FF``. ASCII bytes are kept, ``%`` included (no double encoding).

    Args:
        raw: The header value's bytes, as received.

    Returns:
        An ASCII string to resolve against the response's URL (`normalize`).
    """
    if raw.isascii():
        return raw.decode("ascii")
    return "".join(chr(byte) if byte < 0x80 else f"%{byte:02X}" for byte in raw)


_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
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

        Resolution is the WHATWG URL Standard's, as browsers do it (`resolve`).
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
    """The path of `resolve` ``(href, base)`` for a plain path ``href`` with dots.

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
