"""The README's Celery example, run as written (ports substituted, a broker DB of its own).

Needs the store-path fix of branch h21-paths (a worker's relative ``crawlq.db`` and the
crawl's absolute one are the same file); without it the worker refuses the job, and the crawl
ends with ``worker_refused`` dead letters instead of pages.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import stored_urls
from tests.e2e.sitemap import reachable
from tests.services import need_service, redis_answers

pytestmark = pytest.mark.e2e

BROKER = "redis://127.0.0.1:6379/13"
"""The example's broker, on a Redis DB of this test's own (the README says /0)."""

CELERY = str(Path(sys.executable).with_name("celery"))
CRAWLQ = str(Path(sys.executable).with_name("crawlq"))


def _clear(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        for key in client.scan_iter(match="*"):  # this DB is the test's own
            client.unlink(key)
    finally:
        client.close()


def test_the_readme_celery_example_stores_the_site(site_root: Path, tmp_path: Path) -> None:
    if not redis_answers(BROKER):
        need_service(f"no Redis at {BROKER}")
    _clear(BROKER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [CELERY, "-A", "crawlq.celery", "worker", "--concurrency=4", "--loglevel=INFO"],
        env={**env, "CRAWLQ_BROKER_URL": BROKER},
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    log.close()
    try:
        with ServerThread(make_static_app(site_root)) as server:
            seed = f"{server.base_url}/index.html"
            expected, missing = reachable(site_root, server.base_url + "/")
            proc = subprocess.run(
                [CRAWLQ, "crawl", seed, "--engine", "celery", "--broker", BROKER,
                 "--delay", "0", "--host-concurrency", "16"],
                env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        logged = (tmp_path / "worker.log").read_text(errors="replace")
        assert proc.returncode == 0, (proc.stdout, proc.stderr, logged[-3000:])
        assert "refuses job" not in proc.stderr, proc.stderr
        urls = stored_urls(tmp_path / "crawlq.db")
        assert set(urls) == expected | missing
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        _clear(BROKER)
