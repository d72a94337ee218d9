"""Redirects back to the page just fetched on the Celery engine (issue 23, item 1).

The rule is `crawlq.engine.redirects.comeback`, run through `crawlq.engine.step.process` by
both engines; what this adds is the Celery path's own dedup (admitted links in Redis) and
publishing of the revisit, which must let the revisit through once and still end a loop.
"""

from __future__ import annotations

import pytest

from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryJob, job_counts, stored_dead, stored_pages

pytestmark = pytest.mark.e2e


def test_self_redirects_are_fetched_again_and_a_loop_is_recorded(celery_job: CeleryJob) -> None:
    log = RequestLog()
    with ServerThread(make_fault_app(log=log)) as server:
        base = server.base_url
        fragment, loop = f"{base}/self-redirect/c", f"{base}/self-redirect/l?forever=1"
        reorder = f"{base}/query-order/desc?a=1&b=2"
        worker = celery_job.worker("--concurrency", "1")
        proc = celery_job.crawl([fragment, reorder, loop], "--delay", "0")
        assert "crawl finished" in proc.stdout, worker.log_tail()
    pages = {str(p["url"]): p for p in stored_pages(celery_job.store)}
    assert {u: (p["status"], p["title"]) for u, p in pages.items()} == {
        fragment: (200, "Self c"),
        f"{base}/query-order/desc?b=2&a=1": (200, "Query b=2&a=1"),
    }
    dead = {str(d["url"]): str(d["reason"]) for d in stored_dead(celery_job.store)}
    assert dead == {loop: "redirect_loop"}
    assert [log.count(p) for p in ("/self-redirect/c", "/query-order/desc")] == [2, 2]
    assert log.count("/self-redirect/l") == 2
    assert job_counts(celery_job.frontier, celery_job.job)["pending"] == 0
