"""Engine test helpers: the loopback fault server, and a crawl that returns what it stored.

Crawls run in-process through `crawlq.engine.crawl.Crawl` against real loopback servers and a
real SQLite store in ``tmp_path``; results are read back through `crawlq.store.open_store`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crawlq.engine.crawl import Crawl, CrawlReport
from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.settings import Settings
from crawlq.spider import Spider
from crawlq.store import StoreCounts, open_store

FAST: dict[str, Any] = {
    "delay_s": 0,
    "retry_delay_s": 0.05,
    "timeout_s": 5.0,
    "connect_timeout_s": 2.0,
    "host_backoff_s": 0.05,
}
"""Settings every engine test starts from: no politeness delay, fast retries, short host
backoff after a 429/503 or a connection failure."""


@dataclass
class Results:
    """One crawl run and everything its store holds afterwards (keyed by URL)."""

    report: CrawlReport
    pages: dict[str, PageRecord]
    dead: dict[str, DeadRecord]
    filtered: dict[str, FilteredRecord]
    items: list[ItemRecord]
    counts: StoreCounts
    page_list: list[PageRecord] = field(default_factory=list)
    """Every page record, in store order (a ``dont_filter`` re-visit has one of its own)."""

    def outcome(self, url: str) -> str:
        """``page``, ``dead`` or ``filtered``; fails unless ``url`` has exactly one record."""
        kinds = [
            kind
            for kind, records in (
                ("page", self.pages),
                ("dead", self.dead),
                ("filtered", self.filtered),
            )
            if url in records
        ]
        assert len(kinds) == 1, f"{url} has records {kinds}, expected exactly one"
        return kinds[0]


def _by_url(records: Iterable[Any], kind: str) -> dict[str, Any]:
    records = list(records)
    twice = [url for url, n in Counter(r.url for r in records).items() if n > 1]
    assert twice == [], f"{kind} stored twice: {twice}"
    return {r.url: r for r in records}


async def read_store(path: Path, *, twice: bool = False) -> tuple[dict[str, Any], ...]:
    """The store's records by URL; ``twice``: a URL may have several page records."""
    store = await open_store(str(path))
    try:
        page_list = [p async for p in store.pages()]
        pages = {p.url: p for p in page_list} if twice else _by_url(page_list, "pages")
        dead = _by_url([d async for d in store.dead()], "dead letters")
        filtered = _by_url([f async for f in store.filtered()], "filtered")
        items = [i async for i in store.items()]
        counts = await store.counts()
    finally:
        await store.close()
    return pages, dead, filtered, {"items": items, "counts": counts, "page_list": page_list}


async def crawl(
    store: Path,
    seeds: Iterable[str],
    spider_cls: type[Spider] = Spider,
    *,
    twice: bool = False,
    **settings: Any,
) -> Results:
    """Run one crawl to its end and read back the whole store (``twice``: `read_store`)."""
    cli = {**FAST, "store": str(store), **settings}
    report = await Crawl(Settings.build(cli=cli, env={}), list(seeds), spider_cls).run()
    pages, dead, filtered, rest = await read_store(store, twice=twice)
    return Results(report, pages, dead, filtered, rest["items"], rest["counts"], rest["page_list"])


def assert_nothing_lost(results: Results, urls: Iterable[str]) -> None:
    """Every URL ends as exactly one record, and the store holds nothing else."""
    urls = set(urls)
    for url in urls:
        results.outcome(url)
    stored = set(results.pages) | set(results.dead) | set(results.filtered)
    assert stored == urls
    assert results.report.frontier.pending == 0


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "crawl.db"


@pytest.fixture(params=["sqlite", "redis"])
def frontier(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The crawl's frontier: the embedded SQLite default, or a shared Redis job (a module
    may define its own ``frontier``, as test_postgres_crawl.py does)."""
    if request.param == "sqlite":
        return {}
    return {
        "frontier": request.getfixturevalue("redis_url"),
        "job": request.getfixturevalue("job"),
    }
