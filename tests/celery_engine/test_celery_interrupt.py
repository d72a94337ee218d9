"""Ctrl-C of ``crawl --engine celery --processes P``: quick, and nothing is lost.

A task's URLs on one host with ``--host-concurrency 1`` are fetched one after another for up
to ``--timeout`` seconds (30 s by default); Celery's warm shutdown alone would wait for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import (
    crawl_celery,
    job_counts,
    stored_count,
    stored_urls,
    wait_for,
)

pytestmark = pytest.mark.e2e

LINKS = 16
"""Pages the index links to: one task of ``celery_batch`` (16) URLs."""

LATENCY_S = 2.0
"""Each response's latency while the first run goes: the task of 16 URLs takes 30 s (its
``--timeout`` budget)."""

STOP_BOUND_S = 15.0
"""Generous: the crawl returns in about 4 s (2 s of warm shutdown, then a cold one)."""


def _latency(slow: dict[str, float]) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        await asyncio.sleep(slow["s"])
        return await handler(request)

    return middleware


def _site(root: Path) -> Path:
    """An index linking to ``LINKS`` pages that link nowhere."""
    root.mkdir()
    links = "".join(f'<a href="page-{i}.html">{i}</a>' for i in range(LINKS))
    (root / "index.html").write_text(f"<html><title>index</title><body>{links}</body></html>")
    for i in range(LINKS):
        (root / f"page-{i}.html").write_text(f"<html><title>{i}</title><body>{i}</body></html>")
    return root


def _kill_workers_of(queue: str) -> None:
    """SIGKILL the process group of any celery worker still consuming ``queue``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"celery" in b" ".join(argv) and queue.encode() in argv:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(entry.name), signal.SIGKILL)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("presses", [1, 2], ids=["ctrl-c", "ctrl-c-twice"])
def test_ctrl_c_returns_quickly_and_a_rerun_stores_every_page_once(
    presses: int,
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    root = _site(tmp_path / "site")
    slow = {"s": LATENCY_S}
    app = make_static_app(root)
    app.middlewares.append(_latency(slow))
    store = tmp_path / "store.db"
    with ServerThread(app) as server:
        seed = server.base_url + "/index.html"
        expected = {f"{server.base_url}/page-{i}.html" for i in range(LINKS)} | {seed}
        args = ["--processes", "2", "--delay", "0", "--host-concurrency", "1"]
        cmd = [
            sys.executable, "-m", "crawlq", "crawl", seed, "--engine", "celery",
            "--broker", celery_redis_url, "--frontier", redis_url, "--job", job,
            "--store", str(store), "-q", *args,
        ]  # fmt: skip
        crawl = subprocess.Popen(
            cmd,
            env={**os.environ, "CRAWLQ_CELERY_QUEUE": queue},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a group of its own, as a terminal's foreground job
        )
        try:
            wait_for(lambda: stored_count(store) >= 1, 60, "the seed page")
            time.sleep(LATENCY_S)  # the task of the index's links is running now
            assert crawl.poll() is None
            interrupted = time.monotonic()
            for _ in range(presses):  # Ctrl-C: to the whole foreground group
                os.killpg(crawl.pid, signal.SIGINT)
                time.sleep(0.5)
            out, err = crawl.communicate(timeout=60)
            took = time.monotonic() - interrupted
        finally:
            if crawl.poll() is None:
                os.killpg(crawl.pid, signal.SIGKILL)
                crawl.communicate()
            _kill_workers_of(queue)
        assert took < STOP_BOUND_S, f"Ctrl-C took {took:.1f}s\n{err}"
        assert crawl.returncode == 1, f"{out}\n{err}"
        assert "crawl interrupted: re-run the same command to resume" in out
        assert "Traceback" not in err
        assert job_counts(redis_url, job)["pending"] > 0  # the crawl was not done
        slow["s"] = 0.0
        try:
            proc = crawl_celery(seed, celery_redis_url, redis_url, job, queue, store, *args)
        finally:
            _kill_workers_of(queue)
        assert "crawl finished" in proc.stdout
    urls = stored_urls(store)
    assert set(urls) == expected
    assert [u for u, n in urls.items() if n > 1] == []
    counts = job_counts(redis_url, job)
    assert counts["pending"] == 0
    assert counts["seen"] == counts["done"] == LINKS + 1
