"""Turn response bytes into text: decide whether a body is HTML, and pick its encoding.

Is it HTML? (`sniff`, which `crawlq.request.FetchResult.is_html` and `decode_body` share):

* A body without a usable ``Content-Type`` (none, ``unknown/unknown``, ``application/unknown``,
  ``*/*``) is HTML when it opens with one of the HTML signatures of WHATWG MIME Sniffing §7.1
  ("identifying a resource with an unknown MIME type"): after leading whitespace, a
  case-insensitive ``<!DOCTYPE HTML``, ``<HTML``, ``<HEAD``, ``<SCRIPT``, ``<IFRAME``, ``<H1``,
  ``<DIV``, ``<FONT``, ``<TABLE``, ``<A``, ``<STYLE``, ``<TITLE``, ``<B``, ``<BODY``, ``<BR``,
  ``<P`` or ``<!--``, followed by a space or ``>``. Two liberties: a UTF-8 byte-order mark
  before it is skipped (the standard calls such a body text/plain), and any ASCII whitespace
  ends the tag name as a space does (a line break after ``<html``). HTTP/1.0 servers and bare
  responses send no ``Content-Type``.
* A body labelled ``text/html`` or ``application/xhtml+xml`` is not HTML when its bytes say
  it is substantially binary: it opens with a signature of a binary format
  (`BINARY_SIGNATURES`: PDF, PNG, GIF, JPEG, WebP, MP4, ZIP, gzip, ICO, TrueType… from the
  pattern tables of WHATWG MIME Sniffing §6), or at least `BINARY_SHARE` of its first 1445
  bytes (the "resource header", §5.2), and no fewer than `MIN_BINARY_BYTES`, are "binary
  data bytes" (§3: 0x00-0x08, 0x0B, 0x0E-0x1A, 0x1C-0x1F), the bytes by which §7.1's "rules
  for distinguishing if a resource is text or binary" tell binary from text. A UTF-16 or
  UTF-32 body (by byte-order mark or ``charset``) is exempt from the share rule: its text is
  half NULs. Compressed or random bytes are 6-11 % binary data bytes, HTML almost none, so
  a stray NUL (or a few) keeps a page's title and links: the HTML tokenizer drops a NUL in
  text or replaces it with U+FFFD (HTML Standard §13.2.5, ``unexpected-null-character``), as
  selectolax's lexbor does. Browsers trust the label; a crawler that did would store a title
  and follow links made of compressed bytes. `Sniffed.binary` says which rule fired.

Encodings, by media type (the ``Content-Type`` header without parameters):

* HTML (as above): w3lib's ``html_to_unicode``, which follows the HTML Standard's encoding
  sniffing (§13.2.3.2 "Determining the character encoding"): byte-order mark, then the
  header's ``charset``, then ``<meta charset>`` / ``<meta http-equiv>`` in the body, then
  detection (`detect_encoding`), then UTF-8. WHATWG label overrides apply (``latin-1``
  decodes as ``cp1252``).
* other text (``text/*``, JSON, XML, JavaScript): the header's ``charset`` (RFC 9110 §8.3.2),
  else detection, else UTF-8.
* anything else, a binary body labelled HTML included, is binary: no encoding, empty text.

Decoding never fails: undecodable bytes become U+FFFD.
"""

from __future__ import annotations

import codecs
import encodings
from typing import NamedTuple

from w3lib.encoding import html_to_unicode, http_content_type_encoding

__all__ = [
    "BINARY_SHARE",
    "BINARY_SIGNATURES",
    "CODEC_CACHE_MAX",
    "MIN_BINARY_BYTES",
    "Sniffed",
    "binary_data_bytes",
    "decode_body",
    "detect_encoding",
    "media_type",
    "sniff",
]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/ecmascript"}
)
_UNKNOWN_TYPES = frozenset({"", "unknown/unknown", "application/unknown", "*/*"})
"""Labels that say nothing: the body is sniffed (WHATWG MIME Sniffing §7, "supplied MIME
type is undefined or an unknown type")."""
_HTML_SIGNATURES = (
    b"<!doctype html", b"<html", b"<head", b"<script", b"<iframe", b"<h1", b"<div", b"<font",
    b"<table", b"<a", b"<style", b"<title", b"<b", b"<body", b"<br", b"<p", b"<!--",
)  # fmt: skip
"""WHATWG MIME Sniffing §7.1 HTML signatures, lower-cased (each then needs a tag end)."""
_TAG_ENDS = frozenset(bytes([byte]) for byte in b" >\t\n\x0c\r")
"""Bytes that end a signature's tag name: space and ``>`` (the standard), or whitespace."""
_SNIFF_BYTES = 1445
"""The "resource header": how much of a body sniffing looks at (WHATWG MIME Sniffing §5.2)."""
_WHITESPACE = b"\t\n\x0c\r "

BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"%!PS-Adobe-", "application/postscript"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x1aE\xdf\xa3", "video/webm"),
    (b"wOFF", "font/woff"),
    (b"wOF2", "font/woff2"),
    (b"\x1f\x8b\x08", "application/x-gzip"),
    (b"PK\x03\x04", "application/zip"),
    (b"Rar!\x1a\x07", "application/x-rar-compressed"),
    (b"7z\xbc\xaf'\x1c", "application/x-7z-compressed"),
    (b"(\xb5/\xfd", "application/zstd"),
    (b"\x7fELF", "application/x-executable"),
    (b"\x00\x00\x01\x00", "image/x-icon"),
    (b"\x00\x00\x02\x00", "image/x-icon"),
    (b"\x00\x01\x00\x00", "font/ttf"),
)
"""Openings of binary formats and their media types, from the tables of WHATWG MIME Sniffing
§6.1 (images, with ``RIFF…WEBP`` checked apart), §6.2 (``video/webm``; MP4's ``ftyp`` box,
§6.2.1, checked apart), §6.3 (fonts), §6.4 (archives), plus zstd (RFC 8878 §3.1.1), 7z and
ELF. Signatures made of letters only (``OTTO``, ``ttcf``) are left out: a page may start so."""
BINARY_SHARE = 0.03
"""Share of binary data bytes in a body's first 1445 bytes from which a body labelled HTML is
binary (module docstring). Random bytes hold 10.5 % (27 byte values of 256); deflate and
brotli output of HTML pages 6-11 % (measured on the PostgreSQL docs and crawlq's own text);
a page hardly any."""
MIN_BINARY_BYTES = 8
"""Fewest binary data bytes that make a body labelled HTML binary, however short: a few
stray NULs in a small page are not a binary body."""
_BINARY_DATA_BYTES = frozenset([*range(0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])
"""WHATWG MIME Sniffing §3 "binary data byte": C0 controls but TAB, LF, FF, CR and ESC."""
_TEXT_BYTES = bytes(b for b in range(256) if b not in _BINARY_DATA_BYTES)
_WIDE_CHARSETS = ("utf-16", "utf_16", "utf-32", "utf_32")
_DETECT_SAMPLE_BYTES = 64 * 1024
"""Bytes given to charset_normalizer: enough to decide, bounded so big bodies stay cheap."""


def media_type(content_type: str | None) -> str:
    """Return the media type of a ``Content-Type`` value, lower-cased, without parameters."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def detect_encoding(body: bytes) -> str | None:
    """Guess the encoding of undeclared text.

    Valid UTF-8 (ASCII included) is taken as UTF-8 outright; otherwise charset_normalizer
    looks at the first 64 KiB.

    Args:
        body: The raw bytes.

    Returns:
        A Python codec name (``"utf-8"``, ``"cp1251"``), or None when nothing fits.
    """
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return "utf-8"
    import charset_normalizer  # only for bodies that are not UTF-8: most are

    best = charset_normalizer.from_bytes(body[:_DETECT_SAMPLE_BYTES]).best()
    if best is None:
        return None
    return _codec_name(best.encoding)


def decode_body(content_type: str | None, body: bytes) -> tuple[str | None, str]:
    """Choose the encoding of a response body and decode it (rules in the module docstring).

    Args:
        content_type: The ``Content-Type`` header value, or None when absent.
        body: The body after content decoding (gzip/br removed).

    Returns:
        ``(encoding, text)``: a Python codec name and the decoded text, or ``(None, "")`` for a
        binary body.
    """
    if len(encodings._cache) > CODEC_CACHE_MAX:  # the stdlib cache: forget_unknown_codecs
        forget_unknown_codecs()
    kind = media_type(content_type)
    sniffed = sniff(content_type, body)
    if sniffed.html:
        encoding, text = html_to_unicode(content_type, body, auto_detect_fun=detect_encoding)
        return _codec_name(encoding), text
    if sniffed.binary is not None or not _is_text(kind):
        return None, ""
    encoding = http_content_type_encoding(content_type) or detect_encoding(body) or "utf-8"
    encoding = _codec_name(encoding)
    return encoding, body.decode(encoding, errors="replace")


CODEC_CACHE_MAX = 1024
"""Entries Python's codec registry cache may hold before its misses are forgotten."""


def forget_unknown_codecs() -> None:
    """Drop the codec registry's cached misses: the charset names no codec has.

    `codecs.lookup` (through the stdlib ``encodings`` search function) keeps a None for every
    name it could not find, for the life of the process; w3lib looks up the charset each page
    names (``Content-Type``, ``<meta charset>``), so a site that names a new made-up charset on
    every page would grow a worker's memory without bound. Known codecs stay cached.
    """
    cache = encodings._cache  # the stdlib's own cache; no public way to trim it
    for name in [name for name, codec in cache.items() if codec is None]:
        cache.pop(name, None)


def _is_text(kind: str) -> bool:
    return kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml"))


class Sniffed(NamedTuple):
    """What `sniff` found.

    Attributes:
        html: The body is to be parsed as HTML.
        binary: For a body labelled HTML that is binary: why, such as ``"application/pdf
            signature"`` or ``"412 binary data bytes in the first 1445 bytes"``; else None.
    """

    html: bool
    binary: str | None = None


_NOT_HTML = Sniffed(False)
_HTML = Sniffed(True)


def sniff(content_type: str | None, body: bytes) -> Sniffed:
    """Decide whether a response body is HTML (rules in the module docstring).

    Args:
        content_type: The ``Content-Type`` header value, or None when absent.
        body: The body after content decoding.

    Returns:
        ``html`` True for a body labelled HTML that is not binary, and for an unlabelled body
        with an HTML signature; ``binary`` the reason a body labelled HTML is not parsed.
    """
    kind = media_type(content_type)
    if kind in _HTML_TYPES:
        reason = _binary_reason(content_type, body)
        return _HTML if reason is None else Sniffed(False, reason)
    if kind in _UNKNOWN_TYPES and _sniffs_as_html(body):
        return _HTML
    return _NOT_HTML


def _sniffs_as_html(body: bytes) -> bool:
    """True when an unlabelled body opens with an HTML signature (module docstring)."""
    head = body[:_SNIFF_BYTES].removeprefix(codecs.BOM_UTF8).lstrip(_WHITESPACE)
    if not head.startswith(b"<"):
        return False
    head = head[:16].lower()
    return any(
        head.startswith(signature) and head[len(signature) : len(signature) + 1] in _TAG_ENDS
        for signature in _HTML_SIGNATURES
    )


def binary_data_bytes(sample: bytes) -> int:
    """Count the binary data bytes of ``sample`` (WHATWG MIME Sniffing §3).

    Args:
        sample: Bytes to look at; `sniff` gives it a body's first 1445 bytes.

    Returns:
        How many bytes are 0x00-0x08, 0x0B, 0x0E-0x1A or 0x1C-0x1F.
    """
    return len(sample.translate(None, _TEXT_BYTES))


def _binary_reason(content_type: str | None, body: bytes) -> str | None:
    """Why a body labelled HTML is binary, or None when it is not (module docstring)."""
    for signature, kind in BINARY_SIGNATURES:
        if body.startswith(signature):
            return f"{kind} signature"
    if body.startswith(b"RIFF") and body[8:12] == b"WEBP":
        return "image/webp signature"
    if body[4:8] == b"ftyp" and int.from_bytes(body[:4], "big") % 4 == 0:  # MP4, §6.2.1
        return "video/mp4 signature"
    sample = body[:_SNIFF_BYTES]
    count = binary_data_bytes(sample)
    if count < MIN_BINARY_BYTES or count < BINARY_SHARE * len(sample):
        return None
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return None  # a UTF-32 BOM starts like a UTF-16 one
    charset = (http_content_type_encoding(content_type) or "").lower()
    if charset.startswith(_WIDE_CHARSETS):
        return None
    return f"{count} binary data bytes in the first {len(sample)} bytes"


def _codec_name(encoding: str) -> str:
    """Return the canonical Python codec name (``utf_8`` -> ``utf-8``), or the input if unknown."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return encoding
