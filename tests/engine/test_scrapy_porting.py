"""A spider ported from Scrapy runs unchanged: ``self.logger``, a pipeline's
``open_spider``/``close_spider`` and the spider's ``closed(reason)`` (issue 22's QA, M3).

The fault server answers ``/status/200``; the events each hook records are the evidence.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

import pytest

from crawlq.spider import Response, Spider

from .conftest import crawl


class ScrapyPipeline:
    """Scrapy's hook names only, one sync and one async."""

    events: ClassVar[list[str]] = []

    def open_spider(self, spider: Spider) -> None:
        ScrapyPipeline.events.append(f"open_spider {spider.name}")

    async def close_spider(self, spider: Spider) -> None:
        ScrapyPipeline.events.append(f"close_spider {spider.name}")

    def process_item(self, item: dict[str, Any], response: Response) -> Any:
        ScrapyPipeline.events.append("process_item")
        return item


class BothNames(ScrapyPipeline):
    """crawlq's names and Scrapy's: each is called once, crawlq's first."""

    def open(self, spider: Spider) -> None:
        ScrapyPipeline.events.append("open")

    def close(self) -> None:
        ScrapyPipeline.events.append("close")


class Ported(Spider):
    name = "ported"
    item_pipelines = (ScrapyPipeline,)
    reasons: ClassVar[list[str]] = []

    def parse(self, response: Response) -> Any:
        self.logger.info("parsed %s", response.url)
        yield {"url": response.url}

    def closed(self, reason: str) -> None:
        ScrapyPipeline.events.append(f"closed {reason}")


class PortedBoth(Ported):
    item_pipelines = (BothNames,)


async def test_self_logger_is_named_after_the_spider(
    db: Path, base: str, caplog: pytest.LogCaptureFixture
) -> None:
    ScrapyPipeline.events.clear()
    with caplog.at_level(logging.INFO, logger="ported"):
        r = await crawl(db, [f"{base}/status/200"], Ported)
    assert len(r.items) == 1
    said = [rec for rec in caplog.records if rec.name == "ported"]
    assert [rec.getMessage() for rec in said] == [f"parsed {base}/status/200"]
    assert isinstance(Ported().logger, logging.LoggerAdapter)


async def test_scrapy_pipeline_hooks_and_closed_are_called_once_in_order(
    db: Path, base: str
) -> None:
    ScrapyPipeline.events.clear()
    await crawl(db, [f"{base}/status/200"], Ported)
    assert ScrapyPipeline.events == [
        "open_spider ported",
        "process_item",
        "close_spider ported",
        "closed finished",
    ]


async def test_crawlqs_hook_names_and_scrapys_are_both_called(db: Path, base: str) -> None:
    ScrapyPipeline.events.clear()
    await crawl(db, [f"{base}/status/200"], PortedBoth)
    assert ScrapyPipeline.events == [
        "open",
        "open_spider ported",
        "process_item",
        "close",
        "close_spider ported",
        "closed finished",
    ]


async def test_closed_is_told_the_page_limit(db: Path, base: str) -> None:
    ScrapyPipeline.events.clear()
    seeds = [f"{base}/status/200", f"{base}/status/201", f"{base}/status/202"]
    await crawl(db, seeds, Ported, max_pages=1)
    assert ScrapyPipeline.events[-1] == "closed closespider_pagecount"
