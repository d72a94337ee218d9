"""Host politeness across worker processes on one Redis job: the server's log is the evidence.

Pauses are set in Redis by the worker that saw the answer, after it read it, and with one
request at a time per host the next one is leased only after that: a request that starts
after a pushback's response ended is at least the pause later, whatever the load (the slack
`PAUSE_JITTER_S` is the frontier's millisecond clock). Delays between requests are enforced on
lease starts; the server sees request starts, which add each worker process's own
lease-to-send latency, tens of milliseconds on this loaded 2-core machine (`DELAY_JITTER_S`):
the assertions still tell a delay of 0.5 s or 1 s from none.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from crawlq.testing import RequestLog, make_fault_app
from crawlq.testing.thread import ServerThread
from crawlq.urls import normalize
from tests.conftest import run_crawlq
from tests.e2e.test_distributed import stored_urls, wait_all, worker_proc

pytestmark = pytest.mark.e2e

PAUSE_JITTER_S = 0.005
DELAY_JITTER_S = 0.1


def seed(redis_url: str, job: str, store: Path, *args: str) -> None:
    run_crawlq("seed", "--frontier", redis_url, "--job", job, "--store", str(store), *args)


def test_redirect_hops_from_six_hosts_take_their_target_hosts_slot(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    target_log, log = RequestLog(), RequestLog()
    target = ServerThread(make_fault_app(target_log), host="127.0.0.8")
    servers = [ServerThread(make_fault_app(log), host=f"127.0.0.{i}") for i in range(2, 8)]
    for s in [target, *servers]:
        s.start()
    try:
        seeds = [
            normalize(f"{s.base_url}/redirect-to?url={target.base_url}/status/200%3Fi%3D{i}")
            for i, s in enumerate(servers)
        ]
        store = tmp_path / "store.db"
        domains = [arg for i in range(2, 9) for arg in ("--allow-domain", f"127.0.0.{i}")]
        seed(
            redis_url, job, store, *seeds, "--delay", "1", "--host-concurrency", "1",
            "--allow-private", *domains,
        )  # fmt: skip
        procs = [worker_proc(redis_url, job, "--exit-when-done", store=store) for _ in range(3)]
        assert wait_all(procs, 120) == [0, 0, 0]
        target_host = f"127.0.0.8:{target.port}"
    finally:
        for s in [target, *servers]:
            s.stop()
    assert sum(stored_urls(store).values()) == 12  # six 302 pages, six targets
    hits = sorted(r.start_s for r in target_log.requests() if r.path == "/status/200")
    assert len(hits) == 6
    assert min(b - a for a, b in itertools.pairwise(hits)) >= 1.0 - DELAY_JITTER_S
    assert target_log.max_concurrency(target_host) == 1


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_pauses_the_host_for_two_worker_processes(
    redis_url: str, job: str, tmp_path: Path, status: int
) -> None:
    log = RequestLog()
    with ServerThread(make_fault_app(log)) as server:
        busy = normalize(f"{server.base_url}/busy/k/1?status={status}&retry_after=3")
        others = [f"{server.base_url}/status/200?i={i}" for i in range(9)]
        store = tmp_path / "store.db"
        seed(
            redis_url, job, store, busy, *others, "--delay", "0", "--host-concurrency", "1",
            "--ignore-robots", "--max-depth", "0",
        )  # fmt: skip
        procs = [worker_proc(redis_url, job, "--exit-when-done", store=store) for _ in range(2)]
        assert wait_all(procs, 90) == [0, 0]
        requests = log.requests()
    assert sorted(stored_urls(store)) == sorted([busy, *others])
    pushbacks = [r for r in requests if r.path == "/busy/k/1"]
    assert len(pushbacks) == 2  # the pushback, then its retry
    first = pushbacks[0]
    assert first.end_s is not None
    later = [r.start_s for r in requests if r.start_s > first.start_s]
    assert later and min(later) >= first.end_s + 3.0 - PAUSE_JITTER_S


def test_crawl_delay_holds_across_three_worker_processes(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    log = RequestLog()
    app = make_fault_app(log)
    from crawlq.testing import fault_state

    fault_state(app).robots_txt = "User-agent: *\nCrawl-delay: 0.5\n"
    with ServerThread(app) as server:
        seeds = [f"{server.base_url}/status/200?i={i}" for i in range(6)]
        store = tmp_path / "store.db"
        seed(redis_url, job, store, *seeds, "--delay", "0", "--host-concurrency", "4")
        procs = [worker_proc(redis_url, job, "--exit-when-done", store=store) for _ in range(3)]
        assert wait_all(procs, 90) == [0, 0, 0]
        requests = log.requests()
    assert sum(stored_urls(store).values()) == 6
    pages = sorted(r.start_s for r in requests if r.path != "/robots.txt")
    assert len(pages) == 6
    assert min(b - a for a, b in itertools.pairwise(pages)) >= 0.5 - DELAY_JITTER_S


def test_status_lists_hosts_in_backoff(redis_url: str, job: str, tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    config = tmp_path / "job.toml"
    config.write_text(
        "breaker_failures = 2\nbreaker_parks = 1\nbreaker_cooldown_s = 0.1\nhost_backoff_s = 0.05\n"
    )
    url = "http://127.0.0.1:9/a"  # nothing answers on the discard port
    seed(
        redis_url, job, store, url, "--ignore-robots", "--retry-delay", "0.05",
        "--config", str(config),
    )  # fmt: skip
    worker = worker_proc(redis_url, job, "--exit-when-done", store=store)
    assert wait_all([worker], 60) == [0]
    report = json.loads(
        run_crawlq("status", "--frontier", redis_url, "--job", job, "--json").stdout
    )
    (entry,) = report["backoff"]
    assert entry["host"] == "127.0.0.1:9"
    assert entry["state"] == "down"
    assert entry["failures"] >= 2
