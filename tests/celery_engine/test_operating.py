"""Operating the Celery engine: a crawl no worker consumes says so; spider errors are counted
and reparsed as with the native engine (real ``celery worker`` processes, a real broker)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq.testing import RequestLog, ServerThread, make_fault_app
from tests.celery_engine.conftest import CeleryWorker, crawl_celery
from tests.conftest import run_crawlq
from tests.e2e.test_spider_errors import BROKEN, FIXED, items_of, spider_file

pytestmark = pytest.mark.e2e

NO_WORKER_BOUND_S = 120.0
"""Generous bound for the "no worker" line (it comes after about 10 s of silence)."""


def test_a_crawl_that_no_worker_consumes_says_so(
    tmp_path: Path,
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)  # the seed task stays in it: nobody takes it
    with ServerThread(make_fault_app(RequestLog())) as server:
        cmd = [
            sys.executable, "-m", "crawlq", "crawl", f"{server.base_url}/page/1",
            "--engine", "celery", "--broker", celery_redis_url, "--frontier", redis_url,
            "--job", job, "--store", str(tmp_path / "store.db"), "--delay", "0",
        ]  # fmt: skip
        env = {**os.environ, "CRAWLQ_CELERY_QUEUE": queue}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        said: list[str] = []
        try:
            assert proc.stderr is not None
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stderr, selectors.EVENT_READ)
                deadline = time.monotonic() + NO_WORKER_BOUND_S
                while not any("no Celery worker" in line for line in said):
                    assert time.monotonic() < deadline, f"no such line in {said}"
                    assert proc.poll() is None, f"crawl exited: {said}"
                    if sel.select(timeout=1.0):
                        said.append(proc.stderr.readline().decode(errors="replace"))
            proc.send_signal(signal.SIGINT)  # stop waiting; the task stays in the broker
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    line = next(line for line in said if "no Celery worker" in line)
    assert f"no Celery worker has taken a task of job {job}" in line
    assert f"1 tasks wait in queue '{queue}'" in line
    assert f"celery -A crawlq.celery worker -Q {queue}" in line
    assert proc.returncode == 1  # interrupted


def test_celery_spider_errors_are_counted_and_reparsed_without_a_request(
    tmp_path: Path,
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    workers: Callable[..., CeleryWorker],
) -> None:
    log = RequestLog()
    store = tmp_path / "store.db"  # the workers' CRAWLQ_STORE (see the `workers` fixture)
    broken = spider_file(tmp_path, "broken", BROKEN)
    with ServerThread(make_fault_app(log)) as server:
        base = server.base_url
        workers(celery_redis_url, redis_url, queue, CRAWLQ_SPIDER=broken)
        proc = crawl_celery(
            f"{base}/page/1", celery_redis_url, redis_url, job, queue, store,
            "--spider", broken, "--store-body", "--max-depth", "2", "--delay", "0",
        )  # fmt: skip
        spider_errors = "spider errors: 2 this run, 2 in store (KeyError 1, TypeError 1)"
        assert spider_errors in proc.stdout.splitlines()
        assert "crawlq: warning: 2 pages have spider errors (KeyError 1, TypeError 1)" in (
            proc.stderr
        )
        fetched = log.requests()
        fixed = spider_file(tmp_path, "fixed", FIXED)
        reparsed = run_crawlq("reparse", "--store", str(store), "--spider", fixed, "--errors-only")
        assert log.requests() == fetched
    assert "spider errors fixed: 2, still failing: 0" in reparsed.stdout.splitlines()
    assert [r["page"] for r in items_of(store)] == [f"{base}/page/{n}" for n in (1, 2, 3, 4, 5)]
