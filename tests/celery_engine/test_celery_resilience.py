"""The Celery engine rides out a killed worker and a Redis restart (issue 12 items 5 and 6)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq.testing.request_log import RequestLog
from crawlq.testing.static import generate_site, make_static_app, slow_pages
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import (
    CeleryWorker,
    crawl_process,
    job_counts,
    stored_count,
    stored_urls,
    wait_for,
)
from tests.e2e.sitemap import reachable
from tests.services import RedisServer

pytestmark = pytest.mark.e2e

StartWorker = Callable[..., CeleryWorker]

PAGE_S = 1.0
"""Seconds the test site takes to answer each page: a worker is mid-fetch most of the time."""


def _finish(crawl: subprocess.Popen[str], timeout_s: float, why: Callable[[], str]) -> str:
    try:
        out, err = crawl.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        crawl.kill()
        crawl.communicate()
        raise AssertionError(f"crawl not done: {why()}") from None
    assert crawl.returncode == 0, f"{out}\n{err}\n{why()}"
    return out


@pytest.mark.timeout(450)
def test_a_killed_celery_workers_urls_are_fetched_again_within_seconds(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: StartWorker,
    broker_cleanup: Callable[[str, str], None],
) -> None:
    # Default settings: the broker's visibility timeout is 420 s. The killed worker's URLs
    # come back once its heartbeat is stale (15 s), taken from crawlq's pending records.
    broker_cleanup(celery_redis_url, queue)
    root = generate_site(tmp_path / "site", n_pages=40)
    log = RequestLog()
    app = make_static_app(root, log=log)
    app.middlewares.append(slow_pages(PAGE_S))
    with ServerThread(app) as server:
        expected, missing = reachable(root, server.base_url + "/")
        store = tmp_path / "store.db"
        first = workers(celery_redis_url, redis_url, queue, "--concurrency", "2")
        crawl = crawl_process(
            server.base_url + "/index.html", celery_redis_url, redis_url, job, queue, store,
            "--delay", "0", "--host-concurrency", "2",
        )  # fmt: skip
        try:

            def mid_fetch() -> bool:
                now = time.monotonic()
                on_wire = [
                    r
                    for r in log.requests()
                    if r.end_s is None and r.path != "/robots.txt" and now - r.start_s < PAGE_S / 2
                ]  # and still so when the kill lands
                return stored_count(store) >= 4 and bool(on_wire)

            wait_for(mid_fetch, 90, "the first worker to fetch")
            # The time is taken before the kill: a killed client's connection can end the
            # server's request (its end time) before kill() has returned.
            killed_at = time.monotonic()
            first.kill()
            held = {
                r.path
                for r in log.requests()
                if r.path != "/robots.txt" and (r.end_s is None or r.end_s > killed_at)
            }
            assert held
            second = workers(celery_redis_url, redis_url, queue, "--concurrency", "2")
            logs = lambda: f"{job_counts(redis_url, job)}\n{first.log_tail()}\n{second.log_tail()}"  # noqa: E731

            def again() -> dict[str, float]:
                return {
                    r.path: r.start_s - killed_at
                    for r in log.requests()
                    if r.path in held and r.start_s > killed_at
                }

            # The property: well before the broker's 420 s visibility timeout would return them
            # (a stale heartbeat is 15 s; the rest is a loaded shared machine's slack).
            deadline = time.monotonic() + 150
            while set(again()) != held:
                assert time.monotonic() < deadline, f"not fetched again in 150 s: {held}\n{logs()}"
                time.sleep(0.1)
            refetched = again()
            _finish(crawl, 150, logs)
        finally:
            if crawl.poll() is None:
                crawl.kill()
                crawl.communicate()
    assert max(refetched.values()) < 150, refetched  # not the broker's 420 s
    urls = stored_urls(store)
    assert set(urls) == expected | missing
    assert [u for u, n in urls.items() if n > 1] == []
    assert job_counts(redis_url, job)["pending"] == 0


@pytest.mark.timeout(300)
def test_celery_crawl_rides_out_a_redis_restart(
    queue: str,
    tmp_path: Path,
    workers: StartWorker,
) -> None:
    # Redis (with AOF) is both the broker and the frontier; it restarts mid-crawl.
    server = RedisServer(appendonly=True)
    server.start()
    started: list[CeleryWorker] = []
    try:
        root = generate_site(tmp_path / "site", n_pages=60)
        with ServerThread(make_static_app(root)) as http:
            expected, missing = reachable(root, http.base_url + "/")
            store = tmp_path / "store.db"
            url = server.url
            started += [workers(url, url, queue, "--concurrency", "2") for _ in range(2)]
            crawl = crawl_process(
                http.base_url + "/index.html", url, url, "r", queue, store,
                "--delay", "0.05", "--host-concurrency", "2",
            )  # fmt: skip
            try:
                wait_for(lambda: stored_count(store) >= 10, 90, "10 pages")
                server.stop()
                time.sleep(3)
                server.start()
                out = _finish(crawl, 200, lambda: "\n".join(w.log_tail() for w in started))
            finally:
                if crawl.poll() is None:
                    crawl.kill()
                    crawl.communicate()
            assert "crawl finished" in out
            assert all(w.proc is not None and w.proc.poll() is None for w in started), "\n".join(
                w.log_tail() for w in started
            )
        urls = stored_urls(store)
        assert set(urls) == expected | missing
        assert [u for u, n in urls.items() if n > 1] == []
    finally:
        for w in started:
            w.stop()
        server.cleanup()
