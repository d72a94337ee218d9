"""The contract of an item pipeline (`Pipeline`) and how one drops an item (`DropItem`)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["DropItem", "Pipeline"]


class DropItem(Exception):
    """Raised by a pipeline's ``process_item`` to drop the item, with the reason counted.

    The reason is counted (by pipeline class and reason) in the crawl summary, ``--json`` and
    the ``crawlq_items_dropped_total`` metric; keep it a short code (``"no price"``), not the
    item's values: the first 80 characters count.
    """

    def __init__(self, reason: str = "dropped") -> None:
        super().__init__(reason)
        self.reason = reason or "dropped"


class Pipeline(Protocol):
    """An item pipeline: a class named in ``item_pipelines`` (or a spider's attribute).

    The engine makes one instance per worker process (no arguments) and calls, each optional
    but ``process_item``:

    * ``open(spider)``: once, before its first item, with the spider instance (Scrapy's
      ``open_spider(spider)`` is called too, after it, when the pipeline defines it).
    * ``process_item(item, response) -> item | None``: for every item the pages yield, in
      the order the pipelines are listed; the item is what the callback yielded (a dict, a
      dataclass...) or what the pipeline before returned. None drops it (reason
      ``dropped``); `DropItem` drops it with a reason; any other exception is a spider error
      of the page (none of its items is stored). ``response`` is the page's
      `crawlq.spider.Response` (None for the items of an errback of a dead letter).
    * ``close()``: once, when the worker or crawl ends (then Scrapy's
      ``close_spider(spider)``, when defined).

    Each may be ``async def``: it runs on the worker's event loop; a plain method runs on the
    page thread, where synchronous callbacks run, within ``parse_timeout_s``.
    """

    def process_item(self, item: Any, response: Any) -> Any:
        """Return the item (changed or not), or None to drop it."""
        ...
