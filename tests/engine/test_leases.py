"""Leases in a running worker: a slow download keeps its lease instead of being redelivered."""

from __future__ import annotations

from pathlib import Path

from crawlq.testing import RequestLog

from .conftest import assert_nothing_lost, crawl


async def test_slow_fetch_is_renewed_not_redelivered(base: str, db: Path, log: RequestLog) -> None:
    # The page takes 2.5 s; the visibility timeout is 0.9 s, so only renewals (every 0.3 s)
    # keep it from expiring and being fetched a second time.
    url = f"{base}/delay/2.5"
    results = await crawl(db, [url], visibility_timeout_s=0.9, obey_robots=False)
    assert_nothing_lost(results, [url])
    assert results.pages[url].status == 200
    assert results.pages[url].attempt == 1
    assert log.count("/delay/2.5") == 1
