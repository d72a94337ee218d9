"""Middlewares on the Celery engine: each worker loads its own, from its own environment.

The downloader middleware comes from the worker's ``CRAWLQ_DOWNLOADER_MIDDLEWARES`` (a
per-process setting: the job in Redis carries none), the spider middleware from the spider
class; the server's log shows the header on every page.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq.testing.log import RequestLog
from crawlq.testing.server import make_fault_app
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryWorker, crawl_celery, job_counts, stored_pages

pytestmark = pytest.mark.e2e

StartWorker = Callable[..., CeleryWorker]

CODE = """
import dataclasses

from crawlq.request import CrawlRequest
from crawlq.spider import Spider


class AddHeader:
    async def process_request(self, request):
        return dataclasses.replace(request, headers={**request.headers, "X-Mw": "celery"})


class OnlyPage2:
    def process_spider_output(self, response, results):
        for value in results:
            if not isinstance(value, CrawlRequest) or value.url.endswith("/page/2"):
                yield value


class Pages(Spider):
    spider_middlewares = [OnlyPage2]
"""


def test_a_workers_own_middlewares_run_on_the_celery_engine(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: StartWorker,
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    code = tmp_path / "mw_code.py"
    code.write_text(CODE)
    log = RequestLog()
    store = tmp_path / "store.db"
    with ServerThread(make_fault_app(log=log)) as server:
        worker = workers(
            celery_redis_url, redis_url, queue, "--concurrency", "1",
            CRAWLQ_SPIDER=f"{code}:Pages", CRAWLQ_DOWNLOADER_MIDDLEWARES=f"{code}:AddHeader",
        )  # fmt: skip
        seed = server.base_url + "/page/1"
        proc = crawl_celery(
            seed, celery_redis_url, redis_url, job, queue, store,
            "--delay", "0", "--spider", f"{code}:Pages", "--max-depth", "2",
        )  # fmt: skip
        assert "crawl finished" in proc.stdout, worker.log_tail()
    assert {e.path for e in log.requests()} == {"/robots.txt", "/page/1", "/page/2"}
    assert log.headers("X-Mw", "/page/1") == ["celery"]
    assert log.headers("X-Mw", "/page/2") == ["celery"]
    assert log.headers("X-Mw", "/robots.txt") == [None]
    assert {p["url"] for p in stored_pages(store)} == {seed, seed.replace("/page/1", "/page/2")}
    assert job_counts(redis_url, job)["pending"] == 0
