"""A dead worker costs seconds (docs/architecture.md invariant 8), on the Redis frontier.

A SIGKILLed ``crawlq worker`` stops heartbeating; its leases, and the politeness slots they
hold, go back to the queue once its heartbeat is stale (``heartbeat_s`` x
``stale_after_beats``, 15 s by default), not after the visibility timeout (4 x ``timeout_s``,
120 s by default). A live worker's slow download is never handed to another worker.
"""

from __future__ import annotations

import signal
import socket
import time
from collections import Counter
from pathlib import Path
from typing import cast

import pytest
import redis

from crawlq.frontier.redis import Keyspace
from crawlq.request import CrawlRequest
from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.static import generate_site, make_static_app, slow_pages
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.e2e.sitemap import reachable
from tests.e2e.test_distributed import stored_urls, wait_all, worker_proc

pytestmark = pytest.mark.e2e

PAGE_S = 0.5
"""Seconds the test site takes to answer each page: a worker is mid-fetch most of the time."""


def _fetching(client: redis.Redis, job: str, pid: int) -> list[bytes]:
    """Fingerprints leased by the worker process ``pid`` whose requests are on the wire."""
    prefix = f"{socket.gethostname()}:{pid}:".encode()
    owners: dict[bytes, bytes] = client.hgetall(Keyspace(job).owner)  # type: ignore[assignment]
    return [
        fp
        for fp, own in owners.items()
        if own.partition(b" ")[2].startswith(prefix) and not own.endswith(b"\n")
    ]


def _urls(client: redis.Redis, job: str, fps: list[bytes]) -> set[str]:
    values = cast("list[bytes | None]", client.hmget(Keyspace(job).reqs, fps)) if fps else []
    return {CrawlRequest.from_json(v.split(b"\n", 1)[1]).url for v in values if v}


@pytest.mark.timeout(240)
def test_a_killed_workers_host_resumes_within_seconds(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    # One host, one request at a time: while the killed worker's lease holds the slot, nobody
    # fetches from the host. Default settings otherwise (visibility timeout 120 s).
    root = generate_site(tmp_path / "site", n_pages=30)
    log = RequestLog()
    app = make_static_app(root, log=log)
    app.middlewares.append(slow_pages(PAGE_S))
    client = redis.Redis.from_url(redis_url)
    with ServerThread(app) as server:
        base = server.base_url
        expected, missing = reachable(root, server.base_url + "/")
        store = tmp_path / "store.db"
        run_crawlq(
            "seed", server.base_url + "/index.html", "--frontier", redis_url, "--job", job,
            "--store", str(store), "--delay", "0", "--host-concurrency", "1",
        )  # fmt: skip
        victim = worker_proc(redis_url, job, store=store)
        survivor = worker_proc(redis_url, job, "--exit-when-done", store=store)
        try:
            deadline = time.monotonic() + 60
            while len(log.requests()) < 8 or not _fetching(client, job, victim.pid):
                assert time.monotonic() < deadline, "the victim never fetched"
                assert victim.poll() is None and survivor.poll() is None
                time.sleep(0.01)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            killed_at = time.monotonic()
            held = _urls(client, job, _fetching(client, job, victim.pid))
            assert held, "the victim held no lease on the wire when it was killed"
            deadline = killed_at + 60
            while not [r for r in log.requests() if r.start_s > killed_at]:
                assert time.monotonic() < deadline, "the host did not resume within 60 s"
                time.sleep(0.05)
            resumed_s = min(r.start_s for r in log.requests() if r.start_s > killed_at) - killed_at
            assert wait_all([survivor], 120) == [0]
        finally:
            for proc in (victim, survivor):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            client.close()
    # The lease hold is 15 s after the last beat; the visibility timeout is 120 s. Resuming
    # well before the latter is what the heartbeat buys (a loaded machine adds seconds).
    assert resumed_s < 60, f"the host resumed {resumed_s:.1f} s after the kill"
    urls = stored_urls(store)
    assert set(urls) == expected | missing
    assert [u for u, n in urls.items() if n > 1] == []  # stored once each
    fetched = Counter(base + r.path for r in log.requests() if r.path != "/robots.txt")
    assert max(fetched.values()) <= 2
    twice = {u for u, n in fetched.items() if n == 2}
    assert twice <= held, f"fetched twice but not held by the killed worker: {twice - held}"


@pytest.mark.timeout(180)
def test_a_live_workers_slow_download_is_not_redelivered(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    # The download takes 30 s, twice the staleness threshold: only the renewals keep it.
    log = RequestLog()
    with ServerThread(make_fault_app(log=log)) as server:
        store = tmp_path / "store.db"
        slow, fast = server.base_url + "/delay/30", server.base_url + "/page/1"
        run_crawlq(
            "seed", slow, fast, "--frontier", redis_url, "--job", job,
            "--store", str(store), "--delay", "0", "--timeout", "60", "--max-depth", "0",
            "--ignore-robots",
        )  # fmt: skip
        procs = [worker_proc(redis_url, job, "--exit-when-done", store=store) for _ in range(2)]
        try:
            assert wait_all(procs, 120) == [0, 0]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    assert log.count("/delay/30") == 1
    assert stored_urls(store) == {slow: 1, fast: 1}
