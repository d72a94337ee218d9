"""Request control through whole crawls: headers, Referer, errback and dont_filter.

The loopback fault server's request log records every request header, so each test says
what was sent with which request; 127.0.0.2 is a second host (its own server and log).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from warcio.archiveiterator import ArchiveIterator

from crawlq.engine.inbox import inbox_filter
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.request import CrawlRequest
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.spider import Failure, Response, Spider
from crawlq.testing import RequestLog, make_fault_app

from .conftest import assert_nothing_lost, crawl


@pytest.fixture
def log2() -> RequestLog:
    return RequestLog()


@pytest.fixture
async def base2(log2: RequestLog) -> AsyncIterator[str]:
    async with TestServer(make_fault_app(log2), host="127.0.0.2") as server:
        yield str(server.make_url("")).rstrip("/")


class WithHeaders(Spider):
    """The seed has a header of its own; its callback follows with another, and without."""

    def start_requests(self) -> Iterable[CrawlRequest]:
        for url in self.start_urls:
            yield CrawlRequest(url, headers={"X-Seed": "s"})

    def parse(self, response: Response) -> Any:
        if response.url.endswith("/status/200"):
            yield response.follow("/status/201", callback=self.done, headers={"X-Req": "one"})
            yield response.follow("/status/202", callback=self.done)

    def done(self, response: Response) -> Any:
        yield {"url": response.url}


async def _headers_crawl(db: Path, base: str, log: RequestLog, **settings: Any) -> None:
    seed = f"{base}/status/200"
    r = await crawl(
        db, [seed], WithHeaders, default_headers=["X-Job: j", "Accept: a/b"], **settings
    )
    assert_nothing_lost(r, [seed, f"{base}/status/201", f"{base}/status/202"])
    assert log.headers("X-Seed", "/status/200") == ["s"]
    assert log.headers("X-Req", "/status/201") == ["one"]
    assert log.headers("X-Req", "/status/202") == [None]  # a request's headers are its own
    for path in ("/robots.txt", "/status/200", "/status/201", "/status/202"):
        assert log.headers("X-Job", path) == ["j"]  # every request of the job
        assert log.headers("Accept", path) == ["a/b"]  # over the built-in default
        assert log.headers("Accept-Language", path) == ["en"]
    # Referer: the page a link was found on; none for the seed or robots.txt
    assert log.headers("Referer", "/status/200") == [None]
    assert log.headers("Referer", "/robots.txt") == [None]
    assert log.headers("Referer", "/status/201") == [f"{base}/status/200"]
    assert log.headers("Referer", "/status/202") == [f"{base}/status/200"]


async def test_headers_of_requests_follow_and_the_job_reach_the_server(
    db: Path, base: str, log: RequestLog
) -> None:
    await _headers_crawl(db, base, log)


async def test_headers_travel_through_the_redis_frontier(
    db: Path, base: str, log: RequestLog, redis_url: str, job: str
) -> None:
    await _headers_crawl(db, base, log, frontier=redis_url, job=job)


class Referring(Spider):
    def parse(self, response: Response) -> Any:
        if "/status/200" in response.url:
            yield response.follow("/status/201", callback=self.done)
            yield response.follow(self.settings_other + "/status/202", callback=self.done)

    def done(self, response: Response) -> Any:
        return None

    settings_other = ""


async def test_the_default_policy_sends_only_the_origin_to_another_host(
    db: Path, base: str, base2: str, log: RequestLog, log2: RequestLog
) -> None:
    Referring.settings_other = base2
    seed = f"{base}/status/200#frag"
    r = await crawl(
        db, [seed], Referring, allowed_domains=["127.0.0.1", "127.0.0.2"], allow_private=True
    )
    assert_nothing_lost(r, [f"{base}/status/200", f"{base}/status/201", f"{base2}/status/202"])
    assert log.headers("Referer", "/status/201") == [f"{base}/status/200"]
    assert log2.headers("Referer", "/status/202") == [f"{base}/"]  # cross-origin: the origin


async def test_no_referrer_sends_no_referer(db: Path, base: str, log: RequestLog) -> None:
    seed = f"{base}/page/1"
    r = await crawl(db, [seed], max_depth=1, referer_policy="no-referrer")
    assert_nothing_lost(r, [seed, f"{base}/page/2", f"{base}/page/3"])
    assert log.count() == 4  # robots.txt and three pages
    assert [e.header("Referer") for e in log.requests()] == [None] * 4


async def test_a_spider_header_wins_over_the_referer_and_the_jobs(
    db: Path, base: str, log: RequestLog
) -> None:
    class Own(Spider):
        def parse(self, response: Response) -> Any:
            if response.url.endswith("/status/200"):
                headers = {"referer": "http://own.test/", "x-job": "mine"}
                yield response.follow("/status/201", callback=self.done, headers=headers)

        def done(self, response: Response) -> None:
            return None

    seed = f"{base}/status/200"
    await crawl(db, [seed], Own, default_headers=["X-Job: j"])
    assert log.headers("Referer", "/status/201") == ["http://own.test/"]
    assert log.headers("X-Job", "/status/201") == ["mine"]
    assert [k for k, _ in log.requests(path="/status/201")[0].headers].count("X-Job") == 0


async def test_headers_are_kept_in_the_warc_request_record(
    tmp_path: Path, base: str, log: RequestLog
) -> None:
    seed = f"{base}/status/200"
    warc = tmp_path / "warc"
    r = await crawl(
        tmp_path / "s.db", [seed], WithHeaders, default_headers=["X-Job: j"], warc_dir=str(warc)
    )
    assert_nothing_lost(r, [seed, f"{base}/status/201", f"{base}/status/202"])
    requests: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(warc.iterdir()):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "request":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    requests[uri] = list(record.http_headers.headers)
    sent = {k.lower(): v for k, v in requests[f"{base}/status/201"]}
    assert (sent["x-req"], sent["x-job"], sent["referer"]) == ("one", "j", seed)
    assert {k.lower(): v for k, v in requests[seed]}["x-seed"] == "s"


class Errbacks(Spider):
    """Seeds a 404, an unreachable URL and an errback the rules refuse."""

    dead_url = ""

    def start_requests(self) -> Iterable[CrawlRequest]:
        for url in self.start_urls:
            yield CrawlRequest(url, errback="failed", meta={"tag": url[-3:]})
        yield CrawlRequest(self.dead_url, errback="failed")

    def parse(self, response: Response) -> Any:
        yield {"parsed": response.url}

    def failed(self, failure: Failure) -> Any:
        status = None if failure.response is None else failure.response.status
        yield {"failed": failure.url, "reason": failure.reason, "status": status}
        if failure.response is not None:
            yield failure.response.follow("/status/203", callback=self.parse)


async def test_an_errback_gets_a_404_and_a_dead_letter_and_its_items_are_stored(
    db: Path, base: str, log: RequestLog
) -> None:
    Errbacks.dead_url = "http://127.0.0.1:9/gone"  # the discard port: connection refused
    seed = f"{base}/status/404"
    r = await crawl(
        db, [seed], Errbacks, max_retries=0, allowed_domains=["127.0.0.1"], allow_private=True
    )
    assert_nothing_lost(r, [seed, Errbacks.dead_url, f"{base}/status/203"])
    assert (r.pages[seed].status, r.pages[seed].error) == (404, "http_404")
    assert r.dead[Errbacks.dead_url].reason == "robots_unreachable"  # its robots.txt first
    by_url = {(i.url, i.index): i.data for i in r.items}
    assert by_url[(seed, 0)] == {"failed": seed, "reason": "http_404", "status": 404}
    assert by_url[(Errbacks.dead_url, 0)] == {
        "failed": Errbacks.dead_url,
        "reason": "robots_unreachable",
        "status": None,
    }
    assert by_url[(f"{base}/status/203", 0)] == {"parsed": f"{base}/status/203"}
    assert r.counts.items == 3
    assert log.count("/status/203") == 1  # the errback's request was crawled


class BadErrbacks(Spider):
    def start_requests(self) -> Iterable[CrawlRequest]:
        yield CrawlRequest(self.start_urls[0] + "/status/404", errback="_private")
        yield CrawlRequest(self.start_urls[0] + "/status/410", errback="start_requests")

    def _private(self, failure: Failure) -> Any:
        yield {"private": True}


async def test_a_private_or_base_class_errback_is_refused(
    db: Path, base: str, caplog: pytest.LogCaptureFixture
) -> None:
    r = await crawl(db, [base], BadErrbacks)
    assert r.items == []
    for url, name in [(f"{base}/status/404", "_private"), (f"{base}/status/410", "start_requests")]:
        error = r.pages[url].error or ""
        assert error.startswith("spider_error: MissingCallback"), error
        assert f"has no callback {name!r}" in error


class Again(Spider):
    """The seed follows itself ``copies`` times with dont_filter, and once without."""

    copies = 1
    dont_filter = True

    def parse(self, response: Response) -> Any:
        if not response.meta.get("again"):
            for _ in range(self.copies):
                yield response.follow(
                    response.url, dont_filter=self.dont_filter, meta={"again": True}
                )
        yield response.follow(response.url)  # seen already: never fetched for this


@pytest.mark.parametrize(
    ("copies", "dont_filter", "fetches"), [(1, True, 2), (2, True, 3), (1, False, 1)]
)
async def test_dont_filter_fetches_a_seen_url_again_once_per_yield(
    db: Path,
    base: str,
    log: RequestLog,
    redis_url: str,
    job: str,
    copies: int,
    dont_filter: bool,
    fetches: int,
) -> None:
    Again.copies, Again.dont_filter = copies, dont_filter
    seed = f"{base}/page/1"
    for extra in ({}, {"frontier": redis_url, "job": job}):
        log.clear()
        store = db.with_name(f"{len(extra)}.db")
        r = await crawl(store, [seed], Again, twice=True, **extra)
        assert set(r.pages) == {seed} and not r.dead and not r.filtered
        assert log.count("/page/1") == fetches
        assert len(r.page_list) == fetches  # each visit keeps its own record
        assert r.report.frontier.pending == 0


class RedirectAgain(Spider):
    """The page a redirect ends on asks for the redirect again, with dont_filter."""

    def parse(self, response: Response) -> Any:
        if not response.meta.get("again"):
            yield CrawlRequest(
                response.url.replace("/redirect/0", "/redirect/1"),
                dont_filter=True,
                meta={"again": True},
            )


async def test_the_redirect_hop_of_a_dont_filter_request_bypasses_dedup_too(
    db: Path, base: str, log: RequestLog
) -> None:
    seed = f"{base}/redirect/1"
    r = await crawl(db, [seed], RedirectAgain, twice=True)
    assert set(r.pages) == {seed, f"{base}/redirect/0"}
    assert (log.count("/redirect/1"), log.count("/redirect/0")) == (2, 2)
    assert len(r.page_list) == 4  # the re-visit's redirect and target are records of their own


async def test_inbox_entries_with_bad_headers_are_rejected_naming_the_header(
    redis_url: str, job: str
) -> None:
    frontier = await RedisFrontier.open(redis_url, job, create=True)
    try:
        good = json.dumps({"url": "http://a.test/1", "headers": {"X-A": "1"}})
        bad = json.dumps({"url": "http://a.test/2", "headers": {"Host": "b.test"}})
        worse = json.dumps({"url": "http://a.test/3", "headers": {"X-A": "1\r\nX-B: 2"}})
        await frontier.client.lpush(Keyspace(job).inbox, good, bad, worse)
        frontier.inbox_filter = inbox_filter(Settings(), Scope(("a.test",)))
        assert await frontier.drain_inbox("w1") == 1
        rejected = [
            json.loads(x) for x in await frontier.client.lrange(Keyspace(job).rejected, 0, -1)
        ]
        leases = await frontier.lease(1, "w1", 30.0)
    finally:
        await frontier.close()
    assert [dict(lease.request.headers) for lease in leases] == [{"X-A": "1"}]
    assert sorted(x["reason"] for x in rejected) == [
        "headers: header Host may not be set: the HTTP client sets it from the URL",
        "headers: the value of header X-A holds a character a header value may not hold "
        "(CR, LF, NUL or another control character; RFC 9110 §5.5)",
    ]
