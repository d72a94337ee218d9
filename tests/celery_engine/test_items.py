"""The Celery engine runs item pipelines (from each worker's own environment) and item
dedup (in the job's Redis) as the native engine does."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryJob
from tests.engine.test_items_workers import SPIDER, _check, _items

pytestmark = pytest.mark.e2e


def test_celery_engine_runs_pipelines_and_item_dedup(celery_job: CeleryJob, tmp_path: Path) -> None:
    spider = tmp_path / "shop.py"
    spider.write_text(SPIDER)
    spec = f"{spider}:Shop"
    with ServerThread(make_fault_app(log=RequestLog())) as server:
        worker = celery_job.worker(
            "--concurrency", "2",
            CRAWLQ_SPIDER=spec, CRAWLQ_ITEM_PIPELINES=f"{spider}:Tag",
        )  # fmt: skip
        proc = celery_job.crawl(
            server.base_url + "/page/1",
            "--delay", "0", "--spider", spec, "--item-dedup-key", "sku",
        )  # fmt: skip
        assert "crawl finished" in proc.stdout, worker.log_tail()
    _check(_items(celery_job.store))


PORTED = """
from pathlib import Path

from crawlq.spider import Spider

EVENTS = Path(__file__).with_suffix(".events")


def note(line):
    with EVENTS.open("a") as f:
        f.write(line + "\\n")


class Hooks:
    def open_spider(self, spider):
        note("open_spider")

    def close_spider(self, spider):
        note("close_spider")

    def process_item(self, item, response):
        return item


class Ported(Spider):
    def parse(self, response):
        self.logger.info("parsed %s", response.url)
        yield {"url": response.url}

    def closed(self, reason):
        note("closed " + reason)
"""


def test_celery_workers_call_scrapys_hooks_at_shutdown(
    celery_job: CeleryJob, tmp_path: Path
) -> None:
    """A Celery worker process ends at its shutdown: Scrapy's pipeline hooks and the
    spider's ``closed("shutdown")`` run then (issue 22's QA, M3)."""
    spider = tmp_path / "ported.py"
    spider.write_text(PORTED)
    spec = f"{spider}:Ported"
    events = tmp_path / "ported.events"
    with ServerThread(make_fault_app(log=RequestLog())) as server:
        worker = celery_job.worker(
            "--concurrency", "1", CRAWLQ_SPIDER=spec, CRAWLQ_ITEM_PIPELINES=f"{spider}:Hooks"
        )  # fmt: skip
        proc = celery_job.crawl(server.base_url + "/status/200", "--delay", "0", "--spider", spec)
        assert "crawl finished" in proc.stdout, worker.log_tail()
        worker.stop()
    assert events.read_text().splitlines() == ["open_spider", "close_spider", "closed shutdown"]
