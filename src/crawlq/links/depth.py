"""How deeply the elements of a document nest, estimated before lexbor parses it: `html_depth_over`.

lexbor's parse time grows with the square of the depth (25,000 nested ``<div>`` take
seconds, 150,000 minutes), so a hostile page is measured first. A count of ``<`` and ``</``
by chunks of the text clears most documents (`chunk_count_may_exceed`); the rest are
tokenised with a stack of open elements kept as the HTML tree builder keeps it in outline
(`tokenised_depth_over`). The element categories come from the HTML Standard (void elements,
optional end tags, raw text, the "special" category).
"""

from __future__ import annotations

import re

__all__ = ["chunk_count_may_exceed", "html_depth_over", "tokenised_depth_over"]


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
