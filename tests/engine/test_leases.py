"""Leases in a running worker: a slow download keeps its lease instead of being redelivered,
and a slow store write holds back new leases."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from crawlq.engine.crawl import Crawl
from crawlq.settings import Settings
from crawlq.store import ResultBatch
from crawlq.store.sqlite import SqliteStore
from crawlq.testing import RequestLog

from .conftest import FAST, assert_nothing_lost, crawl


async def test_slow_fetch_is_renewed_not_redelivered(base: str, db: Path, log: RequestLog) -> None:
    # The page takes 2.5 s; the visibility timeout is 0.9 s, so only renewals (every 0.3 s)
    # keep it from expiring and being fetched a second time.
    url = f"{base}/delay/2.5"
    results = await crawl(db, [url], visibility_timeout_s=0.9, obey_robots=False)
    assert_nothing_lost(results, [url])
    assert results.pages[url].status == 200
    assert results.pages[url].attempt == 1
    assert log.count("/delay/2.5") == 1


async def test_a_slow_store_bounds_the_results_waiting_for_it(
    base: str, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Leases are settled only after their pages are written. A slow write must stop the worker
    # from leasing more once concurrency + flush_max_items leases are held, instead of piling
    # up finished pages (and the links in them) in memory while the write goes on.
    write = SqliteStore.write

    async def slow_write(self: SqliteStore, batch: ResultBatch) -> None:
        await asyncio.sleep(0.1)
        await write(self, batch)

    monkeypatch.setattr(SqliteStore, "write", slow_write)
    settings = Settings.build(
        cli={
            **FAST,
            "store": str(db),
            "concurrency": 4,
            "host_concurrency": 4,
            "flush_max_items": 3,
            "max_depth": 0,
            "obey_robots": False,
        },
        env={},
    )
    run = Crawl(settings, [f"{base}/page/{n}" for n in range(1, 61)])
    most_held = 0

    async def watch() -> None:
        nonlocal most_held
        while True:
            if run.worker is not None:
                most_held = max(most_held, len(run.worker._held))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    try:
        report = await run.run()
    finally:
        watcher.cancel()
    assert report.counters.pages == 60  # the seeds, each once (their links are too deep)
    assert 4 < most_held <= 4 + 3
