"""Findings of a fresh-user QA run (a Scrapy user's expectations), each through a whole crawl.

Depth of requests a callback builds itself, a ``dont_filter`` re-visit's own record, the
headers of a POST's redirect, ``--max-pages`` on a store shared by jobs, and errback items in
the summary. The native engine runs them here;
the Celery engine shares the code (`crawlq.engine.parse`, `crawlq.engine.step`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

from crawlq.engine.crawl import Crawl
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.spider import Failure, Response, Spider
from crawlq.store import open_store
from crawlq.testing import RequestLog
from tests.conftest import pg_schema

from .conftest import FAST, crawl


class Chain(Spider):
    """parse -> p2 -> p3 -> p3, every hop a hand-built `CrawlRequest` (no ``follow``)."""

    def parse(self, response: Response) -> Any:
        yield CrawlRequest(response.urljoin("/status/201"), callback="p2")

    def p2(self, response: Response) -> Any:
        yield CrawlRequest(response.urljoin("/status/202"), callback="p3")

    def p3(self, response: Response) -> Any:
        if response.url.endswith("/status/202"):
            yield CrawlRequest(response.urljoin("/status/203"), callback="p3")


async def test_max_depth_bounds_requests_a_callback_builds_itself(
    db: Path, base: str, log: RequestLog
) -> None:
    seed = f"{base}/status/200"
    r = await crawl(db, [seed], Chain, max_depth=1, twice=True)
    assert {url: p.depth for url, p in r.pages.items()} == {seed: 0, f"{base}/status/201": 1}
    assert r.report.counters.skipped["max_depth"] == 1  # /status/202, at depth 2
    assert log.count("/status/202") == 0
    r = await crawl(db.with_name("all.db"), [seed], Chain)
    depths = {url.rsplit("/", 1)[1]: p.depth for url, p in r.pages.items()}
    assert depths == {"200": 0, "201": 1, "202": 2, "203": 3}


class DontFilterAgain(Spider):
    """The seed yields an item and asks for itself again with dont_filter."""

    def parse(self, response: Response) -> Any:
        yield {"visit": "first"}
        yield response.follow(response.url, dont_filter=True, callback="again")

    def again(self, response: Response) -> Any:
        yield {"visit": "again"}


def _visits(pages: Iterable[Any], items: Iterable[Any]) -> tuple[list[int], list[str]]:
    return sorted(p.depth for p in pages), sorted(i.data["visit"] for i in items)


async def test_a_dont_filter_revisit_keeps_the_first_visits_record_and_items(
    db: Path, base: str
) -> None:
    seed = f"{base}/status/200"
    r = await crawl(db, [seed], DontFilterAgain, twice=True)
    assert _visits(r.page_list, r.items) == ([0, 1], ["again", "first"])
    assert (r.counts.pages, r.counts.items) == (2, 2)
    assert (r.report.counters.pages, r.report.counters.items) == (2, 2)


@pytest.fixture
async def pg_store(postgres_url: str) -> AsyncIterator[str]:
    async with pg_schema(postgres_url) as schema:
        yield f"{postgres_url}{'&' if '?' in postgres_url else '?'}options=-csearch_path%3D{schema}"


async def _pg_crawl(
    store: str, redis_url: str, job: str, seeds: list[str], spider: type[Spider], **more: Any
) -> tuple[Any, list[Any], list[Any]]:
    cli = {**FAST, "store": store, "frontier": redis_url, "job": job, **more}
    report = await Crawl(Settings.build(cli=cli, env={}), seeds, spider).run()
    opened = await open_store(store)
    try:
        pages = [p async for p in opened.pages()]
        items = [i async for i in opened.items()]
    finally:
        await opened.close()
    return report, pages, items


async def test_a_dont_filter_revisit_keeps_both_records_in_postgresql(
    base: str, pg_store: str, redis_url: str, job: str
) -> None:
    report, pages, items = await _pg_crawl(
        pg_store, redis_url, job, [f"{base}/status/200"], DontFilterAgain
    )
    assert _visits(pages, items) == ([0, 1], ["again", "first"])
    assert (report.counters.pages, report.store.pages, report.store.items) == (2, 2, 2)


class PostThenRedirect(Spider):
    """POSTs a form to a redirect (``code``) whose target echoes the request."""

    code = 302

    def parse(self, response: Response) -> Any:
        if response.url.endswith("/status/200"):
            target = response.urljoin(f"/redirect-to?url=/echo&status={self.code}")
            yield CrawlRequest.form(
                target, {"user": "u"}, headers={"Content-Language": "en"}, callback="echoed"
            )

    def echoed(self, response: Response) -> Any:
        yield json.loads(response.text)


@pytest.mark.parametrize(("code", "method"), [(301, "GET"), (302, "GET"), (303, "GET")])
async def test_a_post_redirected_as_a_get_drops_its_body_and_content_headers(
    db: Path, base: str, log: RequestLog, code: int, method: str
) -> None:
    PostThenRedirect.code = code
    r = await crawl(db, [f"{base}/status/200"], PostThenRedirect)
    [echo] = [i.data for i in r.items]
    assert (echo["method"], echo["body"]) == (method, "")
    [sent] = log.requests(path="/echo")
    for name in ("Content-Type", "Content-Language", "Content-Length"):
        assert sent.header(name) is None, name
    [posted] = log.requests(path="/redirect-to")
    assert posted.header("Content-Type") == "application/x-www-form-urlencoded"


@pytest.mark.parametrize("code", [307, 308])
async def test_a_307_or_308_keeps_the_method_body_and_headers(
    db: Path, base: str, log: RequestLog, code: int
) -> None:
    PostThenRedirect.code = code
    r = await crawl(db, [f"{base}/status/200"], PostThenRedirect)
    [echo] = [i.data for i in r.items]
    assert (echo["method"], echo["body"]) == ("POST", "user=u")
    [sent] = log.requests(path="/echo")
    assert sent.header("Content-Type") == "application/x-www-form-urlencoded"
    assert sent.header("Content-Language") == "en"


class Follows(Spider):
    def parse(self, response: Response) -> Any:
        yield from response.follow_all()


async def test_max_pages_counts_this_jobs_pages_in_a_shared_store(
    base: str, pg_store: str, redis_url: str, job: str
) -> None:
    first = f"{job}-other"
    try:
        report, pages, _ = await _pg_crawl(
            pg_store, redis_url, first, [f"{base}/page/1"], Follows, max_depth=2
        )
        assert len(pages) == 5  # pages 1 to 5 of the other job
        report, pages, _ = await _pg_crawl(
            pg_store, redis_url, job, [f"{base}/page/10"], Follows, max_pages=2
        )
        assert report.stopped_by == "max_pages"
        assert report.counters.pages == 2
        assert report.job_pages == 2
        assert len(pages) == 7
    finally:
        import redis

        from crawlq.frontier.redis import Keyspace

        client = redis.Redis.from_url(redis_url)
        for key in client.scan_iter(match=Keyspace(first).pattern()):
            client.unlink(key)
        client.close()


class DeadErrback(Spider):
    def start_requests(self) -> Iterable[CrawlRequest]:
        for url in self.start_urls:
            yield CrawlRequest(url, errback="failed")

    def failed(self, failure: Failure) -> Any:
        yield {"failed": failure.url, "reason": failure.reason}


async def test_the_summary_counts_the_items_of_a_dead_letters_errback(db: Path, base: str) -> None:
    seed = f"{base}/status/500"
    r = await crawl(db, [seed], DeadErrback, max_retries=0)
    assert r.dead[seed].reason == "http_500"
    assert [i.data for i in r.items] == [{"failed": seed, "reason": "http_500"}]
    assert (r.report.counters.items, r.counts.items) == (1, 1)
