"""The Celery engine runs item pipelines (from each worker's own environment) and item
dedup (in the job's Redis) as the native engine does."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlq.testing.log import RequestLog
from crawlq.testing.server import make_fault_app
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
