"""crawlq priority on Celery: higher runs sooner on the Redis broker and on RabbitMQ alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq.celery import make_app
from crawlq.settings import Settings
from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import (
    CeleryWorker,
    job_counts,
    stored_count,
    stored_urls,
    wait_for,
)

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_priority_9_runs_before_priority_0_with_one_worker_slot(
    broker: str,
    request: pytest.FixtureRequest,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: Callable[..., CeleryWorker],
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_url = str(
        request.getfixturevalue("celery_redis_url" if broker == "redis" else "amqp_url")
    )
    broker_cleanup(broker_url, queue)
    log = RequestLog()
    with ServerThread(make_fault_app(log=log)) as server:
        low = [f"/page/{n}" for n in range(1, 11)]
        high = [f"/page/{n}" for n in range(101, 111)]
        app = make_app(
            Settings.build(env={}, cli={"broker_url": broker_url, "celery_queue": queue})
        )
        try:
            # the backlog is queued before any worker runs: low priority first
            for path in low:
                app.crawlq.scrape.apply_async(args=[server.base_url + path], kwargs={"job": job})
            for path in high:
                app.crawlq.scrape.apply_async(
                    args=[server.base_url + path], kwargs={"job": job}, priority=9
                )
        finally:
            app.close()
        store = tmp_path / "store.db"
        worker = workers(
            broker_url, redis_url, queue, "--concurrency", "1",
            CRAWLQ_STORE=str(store), CRAWLQ_DELAY_S="0", CRAWLQ_MAX_DEPTH="0",
            CRAWLQ_OBEY_ROBOTS="false",
            CRAWLQ_ALLOW_PRIVATE="true",  # tasks sent directly, like inbox URLs, seed no host
        )  # fmt: skip
        wait_for(lambda: stored_count(store) == 20, 60, "20 pages: " + worker.log_tail(5))
        paths = [r.path for r in log.requests()]
    assert paths == high + low  # all of priority 9 first; first in, first out within each
    assert sorted(stored_urls(store).values()) == [1] * 20
    assert job_counts(redis_url, job)["pending"] == 0
