"""Bounding a hostile document before lexbor parses it: `screen_html`.

Two caps: `cut_at_links` cuts a document with more link tags than ``max_links_per_page``
just before the first one over it, so that neither its tree nor its links grow with the page
(a tree costs lexbor about 650 bytes per element); the depth check (`crawlq.links.depth`)
refuses one nested deeper than ``max_html_depth``. One ``str.count("<")`` settles both for
most pages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice

from crawlq.links.depth import chunk_count_may_exceed, tokenised_depth_over

__all__ = ["DEPTH_CHECK_MIN_TAGS", "Screened", "cut_at_links", "screen_html"]

DEPTH_CHECK_MIN_TAGS = 2048
"""`screen_html` checks the depth of documents with more ``<`` than this only (2,048 nested
``<div>``, the worst case, take lexbor ~15 ms)."""
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
    if tags <= max(max_depth, DEPTH_CHECK_MIN_TAGS) or not chunk_count_may_exceed(
        markup, max_depth
    ):
        return Screened(markup, link_tags)
    return Screened(markup, link_tags, tokenised_depth_over(markup, max_depth))


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
