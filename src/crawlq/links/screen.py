"""Bounding a hostile document before lexbor parses it: `screen_html`.

Two caps: `cut_at_links` cuts a document with more link tags than ``max_links_per_page``
just before the first one over it, so that neither its tree nor its links grow with the page
(a tree costs lexbor about 650 bytes per element); the depth check (`html_depth_over`)
refuses one nested deeper than ``max_html_depth``. One ``str.count("<")`` settles both for
most pages.

The depth check: lexbor's parse time grows with the square of the depth (25,000 nested
``<div>`` take seconds, 150,000 minutes), so a hostile page is measured first. A count of
``<`` and ``</`` by chunks of the text clears most documents (`chunk_count_may_exceed`); the
rest are tokenised with a stack of open elements kept as the HTML tree builder keeps it in
outline (`tokenised_depth_over`). The element categories come from the HTML Standard (void
elements, optional end tags, raw text, the "special" category).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice

__all__ = [
    "DEPTH_CHECK_MIN_TAGS",
    "Screened",
    "chunk_count_may_exceed",
    "cut_at_links",
    "html_depth_over",
    "screen_html",
    "tokenised_depth_over",
]

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


# -- how deeply a document nests --------------------------------------------------------------


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
"""Characters per chunk of the tag count (`chunk_count_may_exceed`)."""
_HTML_TOKEN = re.compile(
    r"<!--.*?(?:-->|\Z)|<[!?][^>]*|<(/?)([A-Za-z][^\t\n\f\r />]*)([^>]*)", re.S
)
"""A comment, a doctype or processing instruction (no groups), or a tag: its ``/`` if it is
an end tag, its name, and the rest up to ``>``."""


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
    if text.count("<") <= limit or not chunk_count_may_exceed(text, limit):
        return None
    return tokenised_depth_over(text, limit)


def chunk_count_may_exceed(text: str, limit: int) -> bool:
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


def tokenised_depth_over(text: str, limit: int) -> int | None:  # noqa: C901  (tokenizer states in one loop)
    """`html_depth_over` by tokenising: None within ``limit``, else the depth found over it."""
    open_elements: list[str] = []
    in_raw_text: str | None = None  # inside <script> and the like: only its end tag counts
    open_foreign = 0  # open <svg> and <math>: "/>" closes their children
    for slash, tag, attributes in _HTML_TOKEN.findall(text):
        if not tag:
            continue  # comment, doctype, processing instruction
        name = tag.lower()
        if in_raw_text is not None:
            if slash and name == in_raw_text:
                in_raw_text = None
            continue
        if name in _NOT_NESTING:
            continue
        if slash:
            _close(open_elements, name)
            if open_foreign and name in ("svg", "math") and name not in open_elements:
                open_foreign -= 1
            continue
        if name in _RAW_TEXT:
            in_raw_text = name
            continue
        if name == "plaintext":
            break  # the attributes of the document is text
        if open_foreign and attributes.endswith("/"):
            continue
        if name in _HEADINGS and open_elements and open_elements[-1] in _HEADINGS:
            open_elements.pop()
        elif name in _NO_SELF_NESTING and name in open_elements[-_END_SEARCH:]:
            _close(open_elements, name)
        open_elements.append(name)
        if name in ("svg", "math"):
            open_foreign += 1
        if len(open_elements) > limit:
            return len(open_elements)
    return None


def _close(open_elements: list[str], name: str) -> None:
    """Pop ``name`` and what was opened after it, if it is open within reach."""
    inline = name not in _SPECIAL
    for i in range(len(open_elements) - 1, max(-1, len(open_elements) - 1 - _END_SEARCH), -1):
        open_name = open_elements[i]
        if open_name == name:
            del open_elements[i:]
            return
        if inline and open_name in _SPECIAL:
            return  # an inline end tag does not close across a block: ignored
