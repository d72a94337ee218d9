"""Downloader and spider middlewares through whole crawls (`crawlq.engine.step`).

The loopback servers' request logs are the evidence: what a middleware sent, how often a
soft 404 was fetched, and that a URL a middleware asked for behind robots.txt or on a private
address was never requested. 127.0.0.2 is a second host with its own server and log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawlq.middleware import Retry, response
from crawlq.request import CrawlRequest, FetchResult
from crawlq.spider import Response, Spider
from crawlq.testing import RequestLog, make_fault_app

from .conftest import assert_nothing_lost, crawl


class AddHeader:
    """Sends ``X-Mw: added`` with every request: the same URL, another header."""

    def process_request(self, request: CrawlRequest) -> CrawlRequest:
        return dataclasses.replace(request, headers={**request.headers, "X-Mw": "added"})


class AsyncHeader:
    async def process_request(self, request: CrawlRequest) -> CrawlRequest | None:
        if "X-Async" in request.headers:
            return None
        return dataclasses.replace(request, headers={**request.headers, "X-Async": "yes"})


async def test_a_downloader_middleware_adds_a_header(db: Path, base: str, log: RequestLog) -> None:
    class WithOwn(Spider):
        downloader_middlewares = [AsyncHeader]

    seed = f"{base}/page/1"
    r = await crawl(
        db,
        [seed],
        WithOwn,
        max_depth=1,
        downloader_middlewares=["tests.engine.test_middlewares:AddHeader"],
    )
    assert_nothing_lost(r, [seed, f"{base}/page/2", f"{base}/page/3"])
    for path in ("/page/1", "/page/2", "/page/3"):
        assert log.headers("X-Mw", path) == ["added"]  # the setting's
        assert log.headers("X-Async", path) == ["yes"]  # the spider's, async
    assert log.headers("X-Mw", "/robots.txt") == [None]  # policy's own fetch: no middleware


def _soft_site(log: RequestLog, fails: int) -> web.Application:
    """``/item``: 200 "Not found" for the first ``fails`` requests, then the real page."""
    seen = {"n": 0}

    async def item(request: web.Request) -> web.Response:
        seen["n"] += 1
        if seen["n"] <= fails:
            return web.Response(text="<title>Oops</title>Not found", content_type="text/html")
        return web.Response(text="<title>Item</title>Here it is", content_type="text/html")

    async def robots(request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nAllow: /\n")

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/item", item)
    app.router.add_get("/robots.txt", robots)
    return app


class Soft404:
    """A 200 page that says "Not found" is a retry (``soft_404``)."""

    def process_response(self, request: CrawlRequest, response: FetchResult) -> FetchResult:
        if response.status == 200 and "Not found" in response.text:
            raise Retry("soft_404", "the page says Not found")
        return response


async def _soft(db: Path, fails: int, **settings: Any) -> tuple[Any, RequestLog, str]:
    log = RequestLog()
    async with TestServer(_soft_site(log, fails), host="127.0.0.1") as server:
        seed = str(server.make_url("/item"))

        class S(Spider):
            downloader_middlewares = [Soft404]

        r = await crawl(db, [seed], S, **settings)
    return r, log, seed


async def test_a_soft_404_is_retried_and_dead_lettered_after_max_retries(db: Path) -> None:
    r, log, seed = await _soft(db, fails=100, max_retries=2)
    assert_nothing_lost(r, [seed])
    assert log.count("/item") == 3  # the first try and two retries
    assert r.dead[seed].reason == "soft_404"
    assert "Not found" in r.dead[seed].detail
    assert r.dead[seed].attempts == 3


async def test_a_soft_404_is_stored_when_the_server_recovers(db: Path) -> None:
    r, log, seed = await _soft(db, fails=2, max_retries=3)
    assert_nothing_lost(r, [seed])
    assert log.count("/item") == 3
    assert r.pages[seed].title == "Item"


async def test_a_response_for_the_same_url_is_a_retry(db: Path) -> None:
    class Again:
        def process_response(self, request: CrawlRequest, got: FetchResult) -> Any:
            return request if "Not found" in got.text else got

    log = RequestLog()
    async with TestServer(_soft_site(log, 1), host="127.0.0.1") as server:
        seed = str(server.make_url("/item"))

        class S(Spider):
            downloader_middlewares = [Again]

        r = await crawl(db, [seed], S)
    assert log.count("/item") == 2
    assert r.pages[seed].title == "Item"


@pytest.fixture
def log2() -> RequestLog:
    return RequestLog()


@pytest.fixture
async def base2(log2: RequestLog) -> AsyncIterator[str]:
    async with TestServer(make_fault_app(log2), host="127.0.0.2") as server:
        yield str(server.make_url("")).rstrip("/")


async def test_a_middleware_cannot_get_a_disallowed_or_private_url_fetched(
    db: Path, base: str, base2: str, log: RequestLog, log2: RequestLog
) -> None:
    """robots.txt disallows /private/; 127.0.0.2 is loopback and not a seed host."""
    elsewhere = {
        f"{base}/status/200": f"{base}/private/secret",
        f"{base}/status/201": f"{base2}/status/200",
    }

    class Redirecting:
        def process_request(self, request: CrawlRequest) -> CrawlRequest | None:
            target = elsewhere.get(request.url)
            return None if target is None else CrawlRequest(target, headers={"X-Mw": "1"})

    class S(Spider):
        downloader_middlewares = [Redirecting]

    seeds = list(elsewhere)
    r = await crawl(db, seeds, S, allowed_domains=["127.0.0.1", "127.0.0.2"])
    assert_nothing_lost(r, [*seeds, *elsewhere.values()])
    assert log.count("/private/secret") == 0
    assert log2.count() == 0  # not even its robots.txt: the guard refused the address
    assert log.count("/status/200") == log.count("/status/201") == 0  # replaced, not fetched
    for seed in seeds:
        assert r.filtered[seed].reason == "middleware_request"
    assert r.filtered[f"{base}/private/secret"].reason == "robots_txt"
    assert r.filtered[f"{base2}/status/200"].reason == "private_address"


async def test_a_response_from_process_request_is_the_page(
    db: Path, base: str, log: RequestLog
) -> None:
    class Cached:
        def process_request(self, request: CrawlRequest) -> FetchResult | None:
            if request.url.endswith("/page/2"):
                return response(request, "<title>From cache</title><a href='/page/9'>x</a>")
            return None

    class S(Spider):
        downloader_middlewares = [Cached]

    seed = f"{base}/page/1"
    r = await crawl(db, [seed], S, max_depth=2, include=["/page/(1|2|9)$"])
    assert log.count("/page/2") == 0
    assert r.pages[f"{base}/page/2"].title == "From cache"
    assert r.pages[f"{base}/page/9"].title == "Page 9"  # its links were followed


async def test_a_raising_middleware_dead_letters_the_url(db: Path, base: str) -> None:
    class Broken:
        def process_request(self, request: CrawlRequest) -> None:
            raise KeyError("boom")

    class S(Spider):
        downloader_middlewares = [Broken]

    seed = f"{base}/status/200"
    r = await crawl(db, [seed], S)
    assert r.dead[seed].reason == "middleware_error"
    assert "process_request: KeyError" in r.dead[seed].detail


class DropPage3:
    """Drops requests for /page/3 and marks every item (sync)."""

    def process_spider_output(self, response: Response, results: Iterable[Any]) -> Any:
        for value in results:
            if isinstance(value, CrawlRequest) and value.url.endswith("/page/3"):
                continue
            if isinstance(value, dict):
                value = {**value, "checked": True}
            yield value


class AsyncEnrich:
    async def process_spider_output(self, response: Response, results: Iterable[Any]) -> Any:
        for value in results:
            if isinstance(value, dict):
                value = {**value, "status": response.status}
            yield value


@pytest.mark.parametrize("callback_kind", ["sync", "async"])
async def test_spider_middlewares_filter_and_enrich_the_output(
    db: Path, base: str, log: RequestLog, callback_kind: str
) -> None:
    class Items(Spider):
        spider_middlewares = [DropPage3, AsyncEnrich]

        def parse(self, response: Response) -> Any:
            yield {"title": response.title}
            yield from response.follow_all()

    class AsyncItems(Items):
        async def parse(self, response: Response) -> Any:
            yield {"title": response.title}
            for request in response.follow_all():
                yield request

    seed = f"{base}/page/1"
    spider = Items if callback_kind == "sync" else AsyncItems
    r = await crawl(db, [seed], spider, max_depth=1)
    assert_nothing_lost(r, [seed, f"{base}/page/2"])
    assert log.count("/page/3") == 0
    assert sorted((i.data["title"], i.data["checked"], i.data["status"]) for i in r.items) == [
        ("Page 1", True, 200),
        ("Page 2", True, 200),
    ]


async def test_a_spec_that_cannot_be_loaded_is_a_config_error(db: Path, base: str) -> None:
    from crawlq.errors import ConfigError

    with pytest.raises(ConfigError, match="downloader_middlewares"):
        await crawl(db, [f"{base}/page/1"], downloader_middlewares=["nope.nothing:Here"])
