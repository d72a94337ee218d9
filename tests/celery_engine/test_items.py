"""The Celery engine runs item pipelines (from each worker's own environment) and item
dedup (in the job's Redis) as the native engine does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq.testing.log import RequestLog
from crawlq.testing.server import make_fault_app
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryWorker, crawl_celery
from tests.engine.test_items_workers import SPIDER, _check, _items

pytestmark = pytest.mark.e2e


def test_celery_engine_runs_pipelines_and_item_dedup(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: Callable[..., CeleryWorker],
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    spider = tmp_path / "shop.py"
    spider.write_text(SPIDER)
    spec = f"{spider}:Shop"
    store = tmp_path / "store.db"
    with ServerThread(make_fault_app(log=RequestLog())) as server:
        worker = workers(
            celery_redis_url, redis_url, queue, "--concurrency", "2",
            CRAWLQ_SPIDER=spec, CRAWLQ_ITEM_PIPELINES=f"{spider}:Tag",
        )  # fmt: skip
        proc = crawl_celery(
            server.base_url + "/page/1", celery_redis_url, redis_url, job, queue, store,
            "--delay", "0", "--spider", spec, "--item-dedup-key", "sku",
        )  # fmt: skip
        assert "crawl finished" in proc.stdout, worker.log_tail()
    _check(_items(store))
