"""A whole crawl through `crawlq.engine.crawl.Crawl` that stores its results in PostgreSQL.

The frontier cannot be the embedded one (``frontier`` unset means "inside the store's SQLite
file"), so it is a shared one: the Redis job of the test, or a SQLite file named explicitly.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from crawlq.engine.crawl import Crawl, CrawlReport
from crawlq.settings import Settings
from crawlq.spider import Response, Spider
from crawlq.store import open_store
from tests.conftest import pg_schema

from .conftest import FAST


class Titles(Spider):
    name = "titles"

    def parse(self, response: Response) -> Any:
        yield {"title": response.css("title::text").get(), "url": response.url}
        yield from response.follow_all()


@pytest.fixture
async def store_url(postgres_url: str) -> AsyncIterator[str]:
    async with pg_schema(postgres_url) as schema:
        yield f"{postgres_url}{'&' if '?' in postgres_url else '?'}options=-csearch_path%3D{schema}"


@pytest.fixture(params=["redis", "sqlite-file"])
def frontier(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite-file":
        yield str(tmp_path / "frontier.db")
        return
    import redis

    from crawlq.frontier.redis.keys import Keyspace

    url: str = request.getfixturevalue("redis_url")
    yield url
    client = redis.Redis.from_url(url)
    for name in getattr(request.node, "crawlq_jobs", []):
        for key in client.scan_iter(match=Keyspace(name).pattern()):
            client.unlink(key)
    client.close()


async def run(
    request: pytest.FixtureRequest, store_url: str, frontier: str, seeds: list[str]
) -> CrawlReport:
    job = f"pg-{uuid.uuid4().hex[:10]}"
    jobs = getattr(request.node, "crawlq_jobs", [])
    request.node.crawlq_jobs = [*jobs, job]
    cli = {
        **FAST,
        "store": store_url,
        "frontier": frontier,
        "job": job,
        "max_depth": 3,
        "max_retries": 1,
    }
    return await Crawl(Settings.build(cli=cli, env={}), seeds, Titles).run()


async def test_a_crawl_stores_pages_items_and_dead_letters_in_postgresql(
    request: pytest.FixtureRequest, base: str, store_url: str, frontier: str
) -> None:
    seeds = [f"{base}/page/1", f"{base}/status/503"]
    report = await run(request, store_url, frontier, seeds)
    expected = {f"{base}/page/{n}" for n in range(1, 8)}  # depth <= 3 from page 1
    assert report.stopped_by == "done"
    assert (report.store.pages, report.store.items, report.store.dead) == (7, 7, 1)

    # A second job over the same URLs fetches everything again and overwrites it.
    if not frontier.startswith("redis"):
        Path(frontier).unlink()
    again = await run(request, store_url, frontier, seeds)
    assert again.counters.pages == 7
    assert (again.store.pages, again.store.items, again.store.dead) == (7, 7, 1)
    assert report.job_pages == again.job_pages == 7

    store = await open_store(store_url)
    try:
        pages = [p async for p in store.pages()]
        items = [i async for i in store.items()]
        dead = [d async for d in store.dead()]
        # Each row counts for the job that wrote it last: the second one, all of them.
        first, second = request.node.crawlq_jobs
        assert (await store.counts(job=first)).settled == 0
        mine = await store.counts(job=second)
        assert (mine.pages, mine.items, mine.dead) == (7, 7, 1)
    finally:
        await store.close()
    assert sorted(p.url for p in pages) == sorted(expected)
    assert len({p.fingerprint for p in pages}) == 7
    assert all(p.spider == "titles" and p.status == 200 for p in pages)
    assert sorted(i.data["url"] for i in items) == sorted(expected)
    assert {i.data["title"] for i in items} == {f"Page {n}" for n in range(1, 8)}
    assert [(d.url, d.reason) for d in dead] == [(f"{base}/status/503", "http_503")]
