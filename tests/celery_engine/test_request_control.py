"""Request control on the Celery engine: a request's headers and ``dont_filter`` ride in the
task message, the job's ``--header`` reaches the worker through the job's settings, and a
followed link carries its Referer."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryJob, job_counts, stored_pages

pytestmark = pytest.mark.e2e

SPIDER = """
from crawlq.spider import Spider


class Control(Spider):
    name = "control"

    def parse(self, response):
        if response.meta.get("again"):
            return
        yield response.follow("/status/201", callback="done", headers={"X-Req": "one"})
        yield response.follow(response.url, dont_filter=True, meta={"again": True})
        yield response.follow(response.url)  # seen: not fetched for this

    def done(self, response):
        yield {"url": response.url}
"""


def test_headers_and_dont_filter_through_task_messages(
    celery_job: CeleryJob, tmp_path: Path
) -> None:
    spider = tmp_path / "control_spider.py"
    spider.write_text(SPIDER)
    spec = f"{spider}:Control"
    log = RequestLog()
    with ServerThread(make_fault_app(log=log)) as server:
        worker = celery_job.worker("--concurrency", "1", CRAWLQ_SPIDER=spec)
        seed = server.base_url + "/page/1"
        proc = celery_job.crawl(seed, "--delay", "0", "--spider", spec, "--header", "X-Job: celery")
        assert "crawl finished" in proc.stdout, worker.log_tail()
    assert log.count("/page/1") == 2  # the seed, and its dont_filter copy once
    assert log.headers("X-Req", "/status/201") == ["one"]
    assert log.headers("X-Job") == ["celery"] * log.count()
    assert log.headers("Referer", "/status/201") == [seed]
    assert log.headers("Referer", "/page/1") == [None, seed]
    pages = {p["url"]: p for p in stored_pages(celery_job.store)}
    assert set(pages) == {seed, seed.replace("/page/1", "/status/201")}
    assert job_counts(celery_job.frontier, celery_job.job)["pending"] == 0
