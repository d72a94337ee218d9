"""Cookies through whole crawls: cookie walls, the worker's jar, a request's own cookies.

The loopback fault server's request log records every Cookie header, so each test says what
was sent with which request. 127.0.0.2 is a second host (its own server and log).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from crawlq.engine.inbox import inbox_filter
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.request import CrawlRequest
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.spider import Response, Spider
from crawlq.testing import RequestLog, make_fault_app

from .conftest import assert_nothing_lost, crawl


@pytest.fixture
def log2() -> RequestLog:
    return RequestLog()


@pytest.fixture
async def base2(log2: RequestLog) -> AsyncIterator[str]:
    async with TestServer(make_fault_app(log2), host="127.0.0.2") as server:
        yield str(server.make_url("")).rstrip("/")


async def test_a_cookie_wall_is_stored_after_at_most_3_requests(
    db: Path, base: str, log: RequestLog
) -> None:
    url = f"{base}/cookie-wall/w"
    r = await crawl(db, [url])
    assert_nothing_lost(r, [url])
    page = r.pages[url]  # one record for the URL: the 200 replaced the 302
    assert (page.status, page.title, page.error) == (200, "Behind wall w", None)
    assert log.count() <= 3
    assert [e.path for e in log.requests()] == ["/robots.txt", "/cookie-wall/w", "/cookie-wall/w"]
    assert log.cookies("/cookie-wall/w") == [None, "wall_w=passed"]
    assert r.report.frontier.pending == 0


async def test_a_cookie_wall_on_the_shared_redis_frontier(
    db: Path, base: str, log: RequestLog, redis_url: str, job: str
) -> None:
    url = f"{base}/cookie-wall/r"
    r = await crawl(db, [url], frontier=redis_url, job=job)
    assert_nothing_lost(r, [url])
    assert (r.pages[url].status, r.pages[url].title) == (200, "Behind wall r")
    assert log.cookies("/cookie-wall/r") == [None, "wall_r=passed"]
    assert log.count() <= 3


async def test_without_cookies_a_cookie_wall_ends_as_a_redirect_loop(
    db: Path, base: str, log: RequestLog
) -> None:
    url = f"{base}/cookie-wall/n"
    r = await crawl(db, [url], cookies_enabled=False)
    assert_nothing_lost(r, [url])
    assert r.dead[url].reason == "redirect_loop"  # fetched again once, then the loop ends
    assert log.cookies("/cookie-wall/n") == [None, None]


async def test_a_self_redirect_that_sets_the_same_cookie_again_ends(
    db: Path, base: str, log: RequestLog
) -> None:
    url = f"{base}/cookie-wall/again?never=1"
    r = await crawl(db, [url])
    assert_nothing_lost(r, [url])
    assert (r.dead[url].reason, r.dead[url].attempts) == ("redirect_loop", 1)
    # the revisit with the cookie, then a hop with nothing new: a loop, recorded
    assert log.cookies("/cookie-wall/again") == [None, "wall_again=passed"]
    assert r.counts.dead_by_reason == {"redirect_loop": 1}


async def test_a_self_redirect_that_always_sets_a_new_cookie_ends_at_max_redirects(
    db: Path, base: str, log: RequestLog
) -> None:
    url = f"{base}/cookie-wall/count?count=1"
    r = await crawl(db, [url], max_redirects=3)
    assert_nothing_lost(r, [url])
    assert (r.dead[url].reason, r.dead[url].attempts) == ("too_many_redirects", 1)
    assert log.cookies("/cookie-wall/count") == [
        None,
        "wall_count=1",
        "wall_count=2",
        "wall_count=3",
    ]


async def test_a_session_cookie_goes_back_to_its_host_only(
    db: Path, base: str, base2: str, log: RequestLog, log2: RequestLog
) -> None:
    seed = f"{base}/set-cookie/sid/abc?link=/status/200&link=/page/1&link={base2}/status/201"
    r = await crawl(
        db,
        [seed],
        max_depth=1,
        allowed_domains=["127.0.0.1", "127.0.0.2"],
        allow_private=True,
    )
    assert_nothing_lost(r, [seed, f"{base}/status/200", f"{base}/page/1", f"{base2}/status/201"])
    assert log.cookies("/set-cookie/sid/abc") == [None]
    assert log.cookies("/status/200") == ["sid=abc"]
    assert log.cookies("/page/1") == ["sid=abc"]
    assert log2.cookies("/status/201") == [None]
    assert log2.cookies("/robots.txt") == [None]


async def test_no_cookies_keeps_no_session(db: Path, base: str, log: RequestLog) -> None:
    seed = f"{base}/set-cookie/sid/abc?link=/status/200"
    r = await crawl(db, [seed], cookies_enabled=False)
    assert_nothing_lost(r, [seed, f"{base}/status/200"])
    assert log.cookies("/status/200") == [None]


async def test_two_jobs_do_not_share_cookies(tmp_path: Path, base: str, log: RequestLog) -> None:
    first = f"{base}/set-cookie/sid/job1?link=/status/200"
    await crawl(tmp_path / "one.db", [first])
    assert log.cookies("/status/200") == ["sid=job1"]
    await crawl(tmp_path / "two.db", [f"{base}/status/201"])
    assert log.cookies("/status/201") == [None]


class WithCookies(Spider):
    """Seeds with a cookie of its own; the seed's callback follows with another."""

    def start_requests(self) -> Iterable[CrawlRequest]:
        for url in self.start_urls:
            yield CrawlRequest(url, cookies={"token": "t1"})

    def parse(self, response: Response) -> Any:
        if response.url.endswith("/status/200"):
            yield response.follow("/status/201", callback=self.done, cookies={"token": "t2"})
            yield response.follow("/status/202", callback=self.done)

    def done(self, response: Response) -> Any:
        yield {"url": response.url}


async def test_a_request_sends_its_own_cookies(db: Path, base: str, log: RequestLog) -> None:
    seed = f"{base}/status/200"
    r = await crawl(db, [seed], WithCookies)
    assert_nothing_lost(r, [seed, f"{base}/status/201", f"{base}/status/202"])
    assert log.cookies("/status/200") == ["token=t1"]
    assert log.cookies("/status/201") == ["token=t2"]
    assert log.cookies("/status/202") == [None]  # a request's cookies are its own


class BadCookies(Spider):
    value = "secret value"  # not on the line a traceback shows

    def parse(self, response: Response) -> Any:
        yield response.follow("/status/201", cookies={"sid": self.value})


async def test_a_spider_with_bad_cookies_gets_a_clear_page_error(
    db: Path, base: str, log: RequestLog, caplog: pytest.LogCaptureFixture
) -> None:
    seed = f"{base}/status/200"
    r = await crawl(db, [seed], BadCookies)
    assert_nothing_lost(r, [seed])
    error = r.pages[seed].error or ""
    assert error.startswith("spider_error: ")
    assert "cookies: the value of cookie 'sid' is not an RFC 6265 cookie-value" in error
    assert "secret value" not in error and "secret value" not in caplog.text
    assert log.count("/status/201") == 0


async def test_inbox_entries_with_bad_cookies_are_rejected_with_a_clear_reason(
    redis_url: str, job: str, caplog: pytest.LogCaptureFixture
) -> None:
    frontier = await RedisFrontier.open(redis_url, job, create=True)
    try:
        good = json.dumps({"url": "http://a.test/1", "cookies": {"sid": "ok"}})
        bad = json.dumps({"url": "http://a.test/2", "cookies": {"sid": "secret value"}})
        revisit = json.dumps({"url": "http://a.test/3", "cookies": {"s": "1"}, "revisit": True})
        worse = json.dumps({"url": "http://a.test/4", "cookies": {"sid;x": "secret"}})
        await frontier.client.lpush(Keyspace(job).inbox, good, bad, revisit, worse)
        frontier.inbox_filter = inbox_filter(Settings(), Scope(("a.test",)))
        assert await frontier.drain_inbox("w1") == 1
        rejected = [
            json.loads(x) for x in await frontier.client.lrange(Keyspace(job).rejected, 0, -1)
        ]
        reasons = sorted(x["reason"] for x in rejected)
        leases = await frontier.lease(1, "w1", 30.0)
    finally:
        await frontier.close()
    assert [dict(lease.request.cookies) for lease in leases] == [{"sid": "ok"}]
    assert len(reasons) == 3
    assert reasons[0].startswith("cookies: cookie name 'sid;x' is not an RFC 6265 token")
    assert reasons[1].startswith("cookies: the value of cookie 'sid' is not an RFC 6265")
    assert reasons[2].startswith("revisit_not_allowed")
    assert "secret" not in caplog.text
