"""Middlewares on the Celery engine: each worker loads its own, from its own environment.

The downloader middleware comes from the worker's ``CRAWLQ_DOWNLOADER_MIDDLEWARES`` (a
per-process setting: the job in Redis carries none), the spider middleware from the spider
class; the server's log shows the header on every page.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryJob, job_counts, stored_pages

pytestmark = pytest.mark.e2e

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
    celery_job: CeleryJob, tmp_path: Path
) -> None:
    code = tmp_path / "mw_code.py"
    code.write_text(CODE)
    log = RequestLog()
    with ServerThread(make_fault_app(log=log)) as server:
        worker = celery_job.worker(
            "--concurrency", "1",
            CRAWLQ_SPIDER=f"{code}:Pages", CRAWLQ_DOWNLOADER_MIDDLEWARES=f"{code}:AddHeader",
        )  # fmt: skip
        seed = server.base_url + "/page/1"
        proc = celery_job.crawl(
            seed, "--delay", "0", "--spider", f"{code}:Pages", "--max-depth", "2"
        )
        assert "crawl finished" in proc.stdout, worker.log_tail()
    assert {e.path for e in log.requests()} == {"/robots.txt", "/page/1", "/page/2"}
    assert log.headers("X-Mw", "/page/1") == ["celery"]
    assert log.headers("X-Mw", "/page/2") == ["celery"]
    assert log.headers("X-Mw", "/robots.txt") == [None]
    assert {p["url"] for p in stored_pages(celery_job.store)} == {
        seed,
        seed.replace("/page/1", "/page/2"),
    }
    assert job_counts(celery_job.frontier, celery_job.job)["pending"] == 0
