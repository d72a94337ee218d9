"""The spider of `toolkit.py`'s ``dict`` variant: one plain dict item per page, no pipelines.

Each page of the PostgreSQL manual gives one item of five fields (the ``pydantic`` variant in
`toolkit_pipelines` gives the same five, as a model through two pipelines):

* ``url``: the page's URL;
* ``title``: ``<title>``'s text, whitespace squashed to single spaces (``""`` when none);
* ``h1_count``: how many ``<h1>`` elements the page has;
* ``word_count``: whitespace-separated words of ``<body>``'s text;
* ``section``: the number a manual title starts with (``"7.8"``, ``"2"``, ``"IV"``,
  ``"F.1"``), or None.

Every field comes from the page's lexbor tree (`Response.tree`, `Response.title`), which the
engine parses anyway for the links, so the item costs no second parse. Loaded as
``toolkit_spider:DictSpider`` with ``bench/`` on ``PYTHONPATH`` (the harness sets it); the
same file runs on every crawlq install the harness compares (it uses only the spider API that
predates issue 22).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from crawlq.spider import Response, Spider

# "7.8. WITH Queries", "Chapter 2. The SQL Language", "Part IV. Client Interfaces", "F.1. x"
_NUMBERED_TITLE = re.compile(r"^(?:(?:Chapter|Part|Appendix)\s+)?([0-9A-Z]+(?:\.[0-9A-Z]+)*)\.\s")


def squash(text: str | None) -> str:
    """``text`` with every run of whitespace made one space, stripped (``""`` for None)."""
    return " ".join((text or "").split())


def section_of(title: str) -> str | None:
    """The section number a manual page's title starts with, or None."""
    match = _NUMBERED_TITLE.match(title)
    return match[1] if match else None


def page_fields(response: Response) -> dict[str, Any]:
    """``url``, raw ``title``, ``h1_count`` and ``word_count`` of a page (no ``section``)."""
    tree = response.tree
    body = tree.body
    return {
        "url": response.url,
        "title": response.title or "",
        "h1_count": len(tree.css("h1")),
        "word_count": len(body.text(separator=" ").split()) if body is not None else 0,
    }


class DictSpider(Spider):
    """Follows every link (as the default spider does) and yields one dict per page."""

    name = "toolkit_dict"

    def parse(self, response: Response) -> Iterator[Any]:
        item = page_fields(response)
        item["title"] = squash(item["title"])
        item["section"] = section_of(item["title"])
        yield item
        yield from response.follow_all()
