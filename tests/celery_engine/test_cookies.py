"""Cookies on the Celery engine: a cookie wall's hop carries its cookie in the task message, and
one worker process that serves two jobs keeps a jar per job."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from crawlq.frontier.redis import Keyspace
from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryJob, job_counts, stored_pages

pytestmark = pytest.mark.e2e


@pytest.fixture
def job2(redis_url: str, job: str) -> Iterator[str]:
    """A second job name of its own, deleted afterwards."""
    name = f"{job}-two"
    yield name
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=Keyspace(name).pattern()):
        client.unlink(key)
    client.close()


def test_a_cookie_wall_and_two_jobs_on_one_worker_process(celery_job: CeleryJob, job2: str) -> None:
    log = RequestLog()
    with ServerThread(make_fault_app(log=log)) as server:
        worker = celery_job.worker("--concurrency", "1")
        wall = server.base_url + "/cookie-wall/c"
        proc = celery_job.crawl(wall, "--delay", "0")
        assert "crawl finished" in proc.stdout, worker.log_tail()
        other = server.base_url + "/status/200"
        proc = celery_job.crawl(other, "--delay", "0", job=job2)
        assert "crawl finished" in proc.stdout, worker.log_tail()
    first, second = log.requests(path="/robots.txt")
    walls = log.requests(path="/cookie-wall/c")
    assert len([r for r in log.requests() if r.start_s < second.start_s]) <= 3
    assert [r.cookie for r in walls] == [None, "wall_c=passed"]
    pages = {p["url"]: p for p in stored_pages(celery_job.store)}
    assert (pages[wall]["status"], pages[wall]["title"]) == (200, "Behind wall c")
    counts = job_counts(celery_job.frontier, celery_job.job)
    assert (counts["pending"], counts["done"]) == (0, 2)  # the 302 and its revisit
    # the same worker process ran job 2: its jar holds none of job 1's cookies
    assert (first.cookie, second.cookie) == (None, None)
    assert log.cookies("/status/200") == [None]
    worker_log = worker.log_path.read_text()
    assert "/cookie-wall/c" in worker_log and "passed" not in worker_log  # no cookie value
