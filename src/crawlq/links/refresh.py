"""``<meta http-equiv="refresh">`` and the ``Refresh`` header: `parse_refresh` and `Refresh`.

`parse_refresh` follows steps 2 to 11.10 of the HTML Standard's "shared declarative refresh
steps" (https://html.spec.whatwg.org/multipage/semantics.html#shared-declarative-refresh-steps);
`refresh_of` takes step 11.11, resolving the target against the document base, and keeps only
a refresh a crawler can follow (an http(s) target of a bounded length). Delays are in whole
seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from crawlq.request.crawl_request import MAX_URL_LENGTH
from crawlq.urls import url_keys
from crawlq.urls.canonical import normalize_or_none
from crawlq.urls.references import HrefResolver

__all__ = ["Refresh", "parse_refresh", "refresh_of"]


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


def refresh_of(content: str, resolver: HrefResolver, base: str, page_url: str) -> Refresh | None:
    """The `Refresh` of one content attribute, or None when it is not one to follow.

    The target is parsed relative to the document base (step 11.11 of the shared declarative
    refresh steps); an empty or fragment-only target names the base itself. A target that is
    not an http(s) URL is passed over, as the standard does for ``javascript:``, so a later
    ``<meta>`` may still count.
    """
    if len(content) > MAX_URL_LENGTH + 100:
        return None  # a URL longer than any followed (`crawlq.rules.scope`)
    parsed = parse_refresh(content)
    if parsed is None:
        return None
    delay_s, url_string = parsed
    if url_string is None:
        return Refresh(delay_s, None)
    stripped = url_string.strip()
    resolved = base.partition("#")[0] if not stripped or stripped[0] == "#" else None
    if resolved is None:
        resolved = resolver.resolve(stripped)
    target = None if resolved is None else normalize_or_none(resolved)
    if target is None:
        return None
    own_url = normalize_or_none(page_url)
    if own_url is not None and url_keys(target).canonical == url_keys(own_url).canonical:
        return Refresh(delay_s, None)
    return Refresh(delay_s, target)


_ASCII_WHITESPACE = "\t\n\f\r "
_WHITESPACE_RUN = re.compile(r"[\t\n\f\r ]*")  # Infra's ASCII whitespace (no \v)
_DIGITS_RUN = re.compile(r"[0-9]*")
_DIGITS_AND_DOTS_RUN = re.compile(r"[0-9.]*")
_DELAY_DIGITS = 12


def parse_refresh(content: str) -> tuple[int, str | None] | None:  # noqa: C901  (WHATWG steps in order)
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
