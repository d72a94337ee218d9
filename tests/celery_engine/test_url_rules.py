"""URL rules and the host budget reach the Celery engine's workers through the job's settings."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp import web

from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryWorker, crawl_celery, job_counts, stored_urls

pytestmark = pytest.mark.e2e


def minting_site(targets: list[str]) -> web.Application:
    """Every page links to /p0../p9, each with a new session id; targets logged raw."""
    minted = itertools.count()

    async def page(request: web.Request) -> web.Response:
        targets.append(request.raw_path)
        n = next(minted)
        links = " ".join(f'<a href="/p{i};jsessionid={n}?sid={n}&k=v">{i}</a>' for i in range(10))
        return web.Response(text=links, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return app


def test_celery_workers_strip_session_ids_and_keep_the_host_budget(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: Callable[..., CeleryWorker],
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    targets: list[str] = []
    with ServerThread(minting_site(targets)) as server:
        base = server.base_url
        worker = workers(celery_redis_url, redis_url, queue, "--concurrency", "2")
        store = tmp_path / "store.db"
        proc = crawl_celery(
            base + "/?utm_source=seed", celery_redis_url, redis_url, job, queue,
            store, "--delay", "0", "--host-concurrency", "4", "--ignore-robots",
            "--max-pages-per-host", "4",
        )  # fmt: skip
        assert "crawl finished" in proc.stdout, worker.log_tail()
    assert len(targets) == 4 and len(set(targets)) == 4, targets  # the budget, each once
    assert targets[0] == "/"
    assert all(t.startswith("/p") and t.endswith("?k=v") and ";" not in t for t in targets[1:])
    assert set(stored_urls(store)) == {base + t for t in targets}
    assert "over max_pages_per_host:" in proc.stdout
    counts = job_counts(redis_url, job)
    assert counts["pending"] == 0 and counts["seen"] == 4
