"""Celery engine: a server's pushback pauses its host for every Celery worker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq.testing import RequestLog, make_fault_app
from crawlq.testing.thread import ServerThread
from crawlq.urls import normalize

from .conftest import CeleryWorker, crawl_celery, stored_pages

JITTER_S = 0.005
StartWorker = Callable[..., CeleryWorker]


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_pauses_the_host_for_every_celery_worker(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: StartWorker,
    broker_cleanup: Callable[[str, str], None],
    status: int,
) -> None:
    broker_cleanup(celery_redis_url, queue)
    log = RequestLog()
    with ServerThread(make_fault_app(log=log)) as server:
        for _ in range(2):
            workers(celery_redis_url, redis_url, queue, "--concurrency", "2")
        busy = normalize(f"{server.base_url}/busy/k/1?status={status}&retry_after=3")
        others = [f"{server.base_url}/status/200?i={i}" for i in range(9)]
        store = tmp_path / "store.db"
        crawl_celery(
            [busy, *others], celery_redis_url, redis_url, job, queue, store,
            "--delay", "0", "--host-concurrency", "1", "--max-depth", "0", "--ignore-robots",
            "--retry-delay", "0.1",
        )  # fmt: skip
        requests = log.requests()
    pages = stored_pages(store)
    assert sorted(str(p["url"]) for p in pages) == sorted([busy, *others])
    assert all(p["status"] == 200 for p in pages)
    pushbacks = [r for r in requests if r.path == "/busy/k/1"]
    assert len(pushbacks) == 2  # the pushback and the retry that succeeded
    first = pushbacks[0]
    assert first.end_s is not None
    later = [r for r in requests if r.start_s > first.start_s]
    assert later
    assert min(r.start_s for r in later) >= first.end_s + 3.0 - JITTER_S
