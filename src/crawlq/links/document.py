"""Parsing an HTML document once, and what its head says for every link: title and base URL.

The tree of `parse_html` (selectolax's lexbor, which repairs malformed HTML as a browser
does) is shared by `crawlq.links.scan`, `extract_title` and the spider's
`crawlq.spider.Response.tree`. The base URL rule is the HTML Standard's: the first
``<base href>`` in tree order, resolved against the page URL, when it is an http(s) URL.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from crawlq.errors import InvalidURL
from crawlq.urls import resolve

__all__ = ["document_base", "extract_title", "parse_html", "resolve_base_href"]

# The document base URL is the first <base href> in tree order, wherever the links are.
_BASE_SELECTOR = "base[href]"
_TITLE_SELECTOR = "title:not(svg *)"  # the HTML <title>, not an SVG image's <title>


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
    return page_url if node is None else resolve_base_href(node.attrs.sget("href"), page_url)


def resolve_base_href(base_href: str, page_url: str) -> str:
    """``<base href>`` resolved against ``page_url``; ``page_url`` when not an http(s) URL."""
    href = base_href.strip()
    if not href:
        return page_url
    try:
        resolved = resolve(href, page_url)
    except InvalidURL:
        return page_url
    return resolved if resolved[:5].lower() in ("http:", "https") else page_url
