"""The Celery engine's run counters: what its workers' settles add to the job's stats in Redis
(items, items dropped by reason, links not followed by reason, retries, dead letters), once
per settled URL however often a task is delivered, and the crawl summary that prints them as
the native engine's does.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import redis

from crawlq.celery.runtime.state import CeleryState
from crawlq.celery.runtime.wire import Entry
from crawlq.celery.runtime.writes import outcome_counts, run_counters, write_outcomes
from crawlq.engine.outcome import Kind, Outcome, WorkerCounters, dead_outcome
from crawlq.frontier.redis import Keyspace
from crawlq.request import CrawlRequest, Lease
from crawlq.settings import Settings
from crawlq.store.sqlite import SqliteStore
from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryJob
from tests.conftest import run_crawlq
from tests.engine.test_items_workers import SPIDER


def _dead(request: CrawlRequest, attempt: int, dropped: int, skipped: int) -> Outcome:
    o = dead_outcome(Lease("t", request, attempt, "w", 0), "http_500", "HTTP 500")
    o.dropped["Tag: asked to"] += dropped
    o.skipped["offsite"] += skipped
    return o


async def test_a_task_delivered_again_adds_its_run_counters_once(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    state = await CeleryState.open(redis_url, job)
    store = await SqliteStore.open(tmp_path / "store.db")
    a, b = CrawlRequest("http://a.test/a"), CrawlRequest("http://a.test/b")
    try:
        assert await state.admit([(a, "seed"), (b, "seed")], run=False) == [True, True]
        sent: list[list[Entry]] = []
        settings = Settings(job=job)
        task = [(Entry(a, attempt=3), _dead(a, 3, dropped=2, skipped=5))]
        for _ in range(2):  # the same task run twice: its worker died before the ack
            await write_outcomes(state, store, settings, task, [], lambda e, *_: sent.append(e))
        assert await state.run_counts() == {
            "dead\nhttp_500": 1,
            "dropped\nTag: asked to": 2,
            "skipped\noffsite": 5,
            "retries": 2,
        }
        # a task of a settled URL and a pending one: only the pending one counts
        task = [
            (Entry(a, attempt=3), _dead(a, 3, dropped=2, skipped=5)),
            (Entry(b), _dead(b, 1, dropped=1, skipped=0)),
        ]
        await write_outcomes(state, store, settings, task, [], lambda e, *_: sent.append(e))
        assert await state.run_counts() == {
            "dead\nhttp_500": 2,
            "dropped\nTag: asked to": 3,
            "skipped\noffsite": 5,
            "retries": 2,
        }
        assert (await state.counts()).dead == 2
    finally:
        await store.close()
        await state.close()


def test_the_run_counters_of_an_outcome_and_of_a_run() -> None:
    request = CrawlRequest("http://a.test/a")
    o = Outcome(Lease("t", request, 2, "w", 0), Kind.FILTERED, reason="robots_txt")
    o.skipped.update({"offsite": 2, "max_depth": 1})
    fields = outcome_counts(Entry(request, attempt=2), o)
    assert fields == {
        "retries": 1,
        "filtered\nrobots_txt": 1,
        "skipped\noffsite": 2,
        "skipped\nmax_depth": 1,
    }
    before = {"retries": 4, "skipped\noffsite": 1, "items": 3}
    now = {"retries": 5, "skipped\noffsite": 3, "items": 3, "dropped\nv: x": 2}
    c = run_counters(now, before, pages=WorkerCounters(pages=7))
    assert (c.pages, c.items, c.retries) == (7, 0, 1)
    assert c.skipped == Counter({"offsite": 2})
    assert c.dropped == Counter({"v: x": 2})


FLAKY_SPIDER = SPIDER.replace(
    """            for n in range(2, 8):""",
    """            yield response.follow("/flaky/k/1", callback="product")
            yield response.follow("http://other.test/x")
            for n in range(2, 8):""",
)
"""The pipeline-and-dedup shop of the native test, plus a page that fails once (a retry) and an
offsite link (not followed)."""

SUMMARY_LINES = ("items:", "items dropped:", "links not followed:", "retries:")


def _summary(stdout: str) -> dict[str, str]:
    lines = {}
    for line in stdout.splitlines():
        for start in SUMMARY_LINES:
            if line.startswith(start + " "):
                lines[start] = line
    return lines


@pytest.mark.e2e
def test_the_celery_summary_counts_drops_links_and_retries_as_the_native_one(
    celery_job: CeleryJob, redis_url: str, tmp_path: Path
) -> None:
    spider = tmp_path / "shop.py"
    spider.write_text(FLAKY_SPIDER)
    spec = f"{spider}:Shop"
    native_store = tmp_path / "native.db"
    native_job = f"{celery_job.job}-native"
    try:
        with ServerThread(make_fault_app(log=RequestLog())) as server:
            native = run_crawlq(
                "crawl", server.base_url + "/page/1", "--frontier", redis_url,
                "--job", native_job, "--processes", "2", "--store", str(native_store),
                "--delay", "0", "--spider", spec, "--pipeline", f"{spider}:Tag",
                "--item-dedup-key", "sku", "--retry-delay", "0.1",
            )  # fmt: skip
    finally:
        client = redis.Redis.from_url(redis_url)
        for key in client.scan_iter(match=Keyspace(native_job).pattern()):
            client.unlink(key)
        client.close()
    with ServerThread(make_fault_app(log=RequestLog())) as server:
        worker = celery_job.worker(
            "--concurrency", "2", CRAWLQ_SPIDER=spec, CRAWLQ_ITEM_PIPELINES=f"{spider}:Tag"
        )
        celery = celery_job.crawl(
            server.base_url + "/page/1",
            "--delay", "0", "--spider", spec, "--item-dedup-key", "sku",
            "--retry-delay", "0.1",
        )  # fmt: skip
    assert "crawl finished" in celery.stdout, worker.log_tail()
    want = _summary(native.stdout)
    assert set(want) == set(SUMMARY_LINES), native.stdout
    assert "Tag: asked to 7" in want["items dropped:"], native.stdout
    assert re.search(r"^retries: 1 this run$", native.stdout, re.M), native.stdout
    assert "offsite 1" in want["links not followed:"], native.stdout
    assert _summary(celery.stdout) == want, celery.stdout
    assert "frontier round trips" not in celery.stdout  # the Celery workers do not count them
