"""``crawlq status`` of a job run by the Celery engine: its pending URLs, not empty queues.

The job's state is made through the engine's own path (`CeleryState.admit` and `settle`, the
job's settings through `bind_job`), with no broker and no worker.
"""

from __future__ import annotations

import json
from pathlib import Path

from crawlq.celery.runtime.state import CeleryState
from crawlq.engine.job import bind_job
from crawlq.records import PageRecord
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import HostPolicy, Politeness
from crawlq.settings import Settings
from crawlq.store import ResultBatch
from crawlq.store.sqlite import SqliteStore
from tests.conftest import run_crawlq


async def _store_one_page(path: Path, request: CrawlRequest, job: str | None) -> None:
    store = await SqliteStore.open(path)
    try:
        page = PageRecord(request.fingerprint, request.url, request.url, 200, "text/html", 0,
                          "Home", 1.7e9, 10, 0.1, 1, None, "default")  # fmt: skip
        await store.write(ResultBatch(pages=[page], job=job))
    finally:
        await store.close()


def status_json(redis_url: str, job: str) -> dict[str, object]:
    proc = run_crawlq("status", "--frontier", redis_url, "--job", job, "--json")
    report = json.loads(proc.stdout)
    assert isinstance(report, dict)
    return report


async def test_status_of_a_celery_job_reports_its_pending_urls(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    store = tmp_path / "s.db"
    settings = Settings(job=job, frontier=redis_url, store=str(store), delay_s=0)
    requests = [CrawlRequest(f"http://127.0.0.1:9/{n}") for n in range(5)]
    state = await CeleryState.open(redis_url, job)
    try:
        await bind_job(state.frontier(Politeness(HostPolicy(0, 1))), settings, create=True)
        assert await state.admit([(r, "seed") for r in requests], run=False) == [True] * 5
        await _store_one_page(store, requests[0], job)
        assert await state.settle([requests[0].fingerprint], [requests[1].fingerprint]) == 2
        await state.add_delayed(1)

        report = status_json(redis_url, job)
        assert report["engine"] == "celery"
        assert report["pending"] == 3  # queued in the broker, running or waiting for a retry
        assert (report["seen"], report["done"], report["dead"], report["delayed"]) == (5, 1, 1, 1)
        assert report["stored"] == 1
        # not known to Redis for a Celery job: null, not a misleading 0
        assert report["queued"] is None and report["in_flight"] is None
        assert report["workers"] is None and report["pages_per_s"] is None

        table = run_crawlq("status", "--frontier", redis_url, "--job", job).stdout
        assert f"job {job} (Celery engine)" in table
        assert "pending (queued or running)  3" in table
        assert "in flight" not in table

        # all settled: still a Celery job (the engine mark), with nothing pending
        await state.settle([r.fingerprint for r in requests[2:]], [])
        report = status_json(redis_url, job)
        assert (report["engine"], report["pending"], report["done"]) == ("celery", 0, 4)
    finally:
        await state.close()


def test_status_json_of_a_native_job_keeps_its_fields(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    run_crawlq(
        "seed", "http://127.0.0.1:9/a", "http://127.0.0.1:9/b", "--frontier", redis_url,
        "--job", job, "--store", str(tmp_path / "s.db"),
    )  # fmt: skip
    report = status_json(redis_url, job)
    assert list(report)[:11] == [
        "job", "queued", "in_flight", "delayed", "dead", "seen", "done", "stored",
        "pages_per_s", "workers", "hosts",
    ]  # fmt: skip
    assert (report["queued"], report["in_flight"], report["seen"], report["workers"]) == (
        2, 0, 2, [],
    )  # fmt: skip
    assert (report["engine"], report["pending"]) == ("native", None)
    assert report["hosts"] == [{"host": "127.0.0.1:9", "queued": 2, "in_flight": 0}]


async def test_a_retry_rescheduled_counts_as_delayed_and_as_a_retry_in_one_step(
    redis_url: str, job: str
) -> None:
    request = CrawlRequest("http://127.0.0.1:9/retry")
    state = await CeleryState.open(redis_url, job)
    try:
        assert await state.admit([(request, "seed")], run=False) == [True]
        before = await state.client.zscore(state.keys.pending_at, request.fingerprint)
        await state.reschedule([request.fingerprint], 30.0, retries=1)
        after = await state.client.zscore(state.keys.pending_at, request.fingerprint)
        assert before is not None and after is not None and after >= before + 29_000
        assert (await state.counts()).delayed == 1
        assert await state.client.hget(state.keys.stats, "retries") == b"1"
        await state.reschedule([request.fingerprint], 0.0)  # a politeness wait: no retry
        assert (await state.counts()).delayed == 1
        assert await state.client.hget(state.keys.stats, "retries") == b"1"
    finally:
        await state.close()
