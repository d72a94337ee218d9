"""Turn response bytes into text: pick the character encoding the way a browser would.

Rules, by media type (the ``Content-Type`` header without parameters):

* HTML (``text/html``, ``application/xhtml+xml``, or no ``Content-Type`` at all when the body
  sniffs as HTML): w3lib's ``html_to_unicode``, which follows the HTML Standard's encoding
  sniffing (§13.2.3.2 "Determining the character encoding"): byte-order mark, then the
  header's ``charset``, then ``<meta charset>`` / ``<meta http-equiv>`` in the body, then
  detection (`detect_encoding`), then UTF-8. WHATWG label overrides apply (``latin-1``
  decodes as ``cp1252``).
* other text (``text/*``, JSON, XML, JavaScript): the header's ``charset`` (RFC 9110 §8.3.2),
  else detection, else UTF-8.
* anything else is binary: no encoding, empty text.

Decoding never fails: undecodable bytes become U+FFFD.
"""

from __future__ import annotations

import codecs

from w3lib.encoding import html_to_unicode, http_content_type_encoding

__all__ = ["decode_body", "detect_encoding", "media_type"]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/ecmascript"}
)
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<title", b"<script", b"<!--")
"""Openings that mark an unlabelled body as HTML (a subset of WHATWG MIME Sniffing §7.1)."""
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
    kind = media_type(content_type)
    if kind in _HTML_TYPES or (not kind and _sniffs_as_html(body)):
        encoding, text = html_to_unicode(content_type, body, auto_detect_fun=detect_encoding)
        return _codec_name(encoding), text
    if not _is_text(kind):
        return None, ""
    encoding = http_content_type_encoding(content_type) or detect_encoding(body) or "utf-8"
    encoding = _codec_name(encoding)
    return encoding, body.decode(encoding, errors="replace")


def _is_text(kind: str) -> bool:
    return kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml"))


def _sniffs_as_html(body: bytes) -> bool:
    """True when an unlabelled body starts like an HTML document (after a BOM and blanks)."""
    head = body[:1024].removeprefix(codecs.BOM_UTF8).lstrip().lower()
    return head.startswith(_HTML_STARTS)


def _codec_name(encoding: str) -> str:
    """Return the canonical Python codec name (``utf_8`` -> ``utf-8``), or the input if unknown."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return encoding
