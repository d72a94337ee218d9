"""The spider of `toolkit.py`'s ``pydantic`` variant: a pydantic item through two pipelines.

The same five fields as `toolkit_spider.DictSpider`, with the same work, moved to where a
toolkit user would put it: the callback yields a `PageItem` model with the raw title and no
section; `NormaliseTitle` (sync) squashes the title's whitespace, and drops a page without
one with ``DropItem("no title")`` (no page of the manual is one, so every page keeps its
item); `AddSection` (``async def``) fills ``section`` from the title. What the variant costs
over ``dict`` is then the toolkit's own work: building and validating the model, adapting it
to a dict for the store (``crawlq.items.adapt``), and running the pipelines (the agreed API
of issue 22: the spider's ``item_type`` and ``item_pipelines`` attributes,
``crawlq.items.DropItem``).

Needs ``crawlq.items`` (issue 22's pipelines) and pydantic: `toolkit.py` checks both before
it runs the variant, and skips it with a line saying which is missing. Loaded as
``toolkit_pipelines:PydanticSpider`` with ``bench/`` on ``PYTHONPATH``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from toolkit_spider import page_fields, section_of, squash

from crawlq.items import DropItem
from crawlq.spider import Response, Spider


class PageItem(BaseModel):
    """One page of the manual (see `toolkit_spider` for the fields)."""

    url: str
    title: str
    h1_count: int
    word_count: int
    section: str | None = None


class NormaliseTitle:
    """Squashes the title's whitespace; a page without a title is dropped."""

    def process_item(self, item: PageItem, response: Response) -> PageItem:
        title = squash(item.title)
        if not title:
            raise DropItem("no title")
        item.title = title
        return item


class AddSection:
    """Fills ``section`` from the title (an ``async def`` pipeline)."""

    async def process_item(self, item: PageItem, response: Response) -> PageItem:
        item.section = section_of(item.title)
        return item


class PydanticSpider(Spider):
    """Follows every link and yields one `PageItem` per page through the two pipelines."""

    name = "toolkit_pydantic"
    item_type = PageItem
    item_pipelines = (NormaliseTitle, AddSection)

    def parse(self, response: Response) -> Iterator[Any]:
        yield PageItem(**page_fields(response))
        yield from response.follow_all()
