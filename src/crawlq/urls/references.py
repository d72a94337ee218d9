"""Relative references resolved as browsers resolve them, and the encodings a URL is sent in.

Relative references (links, ``Location`` headers) are resolved by the WHATWG URL Standard's
basic URL parser, as browsers resolve them (`resolve`, through the ada library): for the
special schemes http and https a backslash counts as a slash, any run of slashes after the
scheme starts the authority (``///host/path``), ``http:path`` is relative to an http base
and names a host under any other base, tabs and newlines are removed and leading and
trailing spaces and controls stripped. The query of a link is percent-encoded in the page's
encoding, its path in UTF-8 (`encode_query`, WHATWG URL "query state"), and a ``Location``
header keeps its bytes (`decode_location`). Pure functions, no I/O; errors are `InvalidURL`.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from functools import lru_cache

from crawlq.errors import InvalidURL

__all__ = ["decode_location", "encode_query", "query_codec", "resolve"]

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
