"""The README's Celery example, run as written (ports substituted, a private Redis as broker).

Needs the store-path fix of branch h21-paths (a worker's relative ``crawlq.db`` and the
crawl's absolute one are the same file); without it the worker refuses the job, and the crawl
ends with ``worker_refused`` dead letters instead of pages.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import stored_urls
from tests.e2e.sitemap import reachable
from tests.services import RedisServer, need_service

pytestmark = pytest.mark.e2e

CELERY = str(Path(sys.executable).with_name("celery"))
CRAWLQ = str(Path(sys.executable).with_name("crawlq"))


@pytest.fixture
def broker() -> Iterator[str]:
    """The example's broker (the README says ``redis://localhost:6379/0``): a private
    ``redis-server``, all of it this test's, whatever else runs on the machine's Redis (the
    example's default queue and job names are the same in every run)."""
    if shutil.which("redis-server") is None:
        need_service("no redis-server binary for the README example's broker")
    server = RedisServer(appendonly=False)
    server.start()
    try:
        yield server.url
    finally:
        server.cleanup()


def test_the_readme_celery_example_stores_the_site(
    site_root: Path, tmp_path: Path, broker: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [CELERY, "-A", "crawlq.celery", "worker", "--concurrency=4", "--loglevel=INFO"],
        env={**env, "CRAWLQ_BROKER_URL": broker},
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    log.close()
    try:
        with ServerThread(make_static_app(site_root)) as server:
            seed = f"{server.base_url}/index.html"
            expected, missing = reachable(site_root, server.base_url + "/")
            proc = subprocess.run(
                [CRAWLQ, "crawl", seed, "--engine", "celery", "--broker", broker,
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
