"""``crawlq status``'s ``stored``: the pages the job wrote, in a store other jobs write to too."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from crawlq.cli.reports import status_table
from crawlq.engine.job import bind_job
from crawlq.frontier import open_frontier
from crawlq.ops.report import job_report
from crawlq.records import PageRecord
from crawlq.settings import Settings
from crawlq.store import ResultBatch
from crawlq.store.sqlite import SqliteStore


def page(n: int) -> PageRecord:
    url = f"http://127.0.0.1:9/{n}"
    return PageRecord(n.to_bytes(20, "big"), url, url, 200, "text/html", 0, None, 1.7e9 + n, 10,
                      0.1, 1, None, "default")  # fmt: skip


@pytest.fixture
def other_job(redis_url: str) -> Iterator[str]:
    """A second job name on the test Redis, its keys deleted afterwards."""
    import redis

    from crawlq.frontier.redis import Keyspace

    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=Keyspace(name).pattern()):
        client.unlink(key)
    client.close()


async def _seed(redis_url: str, job: str, store: Path) -> None:
    settings = Settings(job=job, frontier=redis_url, store=str(store), delay_s=0)
    frontier = await open_frontier(redis_url, job=job, create=True)
    try:
        await bind_job(frontier, settings, create=True)
    finally:
        await frontier.close()


def _text(report: dict[str, object]) -> str:
    console = Console(width=120, record=True)
    with console.capture() as captured:
        console.print(status_table(report))
    return captured.get()


async def test_stored_counts_the_job_and_stored_total_the_whole_store(
    redis_url: str, job: str, other_job: str, tmp_path: Path
) -> None:
    path = tmp_path / "shared.db"
    for name in (job, other_job):
        await _seed(redis_url, name, path)
    store = await SqliteStore.open(path)
    try:
        await store.write(ResultBatch(pages=[page(1), page(2)], job=job))
        await store.write(ResultBatch(pages=[page(3)], job=other_job))
        await store.write(ResultBatch(pages=[page(4)]))  # an embedded crawl's: no job
    finally:
        await store.close()

    report = await job_report(redis_url, job)
    assert (report["stored"], report["stored_total"]) == (2, 4)
    assert "stored pages  2 (of 4 in the store)" in _text(report)
    other = await job_report(redis_url, other_job)
    assert (other["stored"], other["stored_total"]) == (1, 4)


async def test_a_job_alone_in_its_store_shows_one_figure(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    path = tmp_path / "own.db"
    await _seed(redis_url, job, path)
    store = await SqliteStore.open(path)
    try:
        await store.write(ResultBatch(pages=[page(1)], job=job))
    finally:
        await store.close()
    report = await job_report(redis_url, job)
    assert (report["stored"], report["stored_total"]) == (1, 1)
    assert list(report)[-1] == "stored_total"
    text = _text(report)
    assert "stored pages  1" in text and "in the store" not in text
