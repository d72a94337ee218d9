"""The private-address guard end to end: links and redirects to a non-seed loopback host.

127.0.0.1 is the seed host; 127.0.0.2 is another loopback host in ``allowed_domains`` but
not a seed host, so by default nothing may reach it. Its server's request log is the proof.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawlq.engine.seeding import seed
from crawlq.errors import ConfigError
from crawlq.fetch import Fetcher
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.testing import RequestLog, make_static_app
from tests.engine.conftest import crawl


@dataclass
class Site:
    base1: str  # the seed host, 127.0.0.1
    base2: str  # another loopback host, 127.0.0.2
    log2: RequestLog  # every request that reached 127.0.0.2

    @property
    def seed(self) -> str:
        return f"{self.base1}/"

    @property
    def redirect(self) -> str:
        return f"{self.base1}/redir"

    @property
    def linked(self) -> str:
        return f"{self.base2}/linked.html"

    @property
    def target(self) -> str:
        return f"{self.base2}/target.html"


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    root = tmp_path / "site2"
    root.mkdir()
    (root / "linked.html").write_text("<title>linked</title>")
    (root / "target.html").write_text("<title>target</title>")
    log2 = RequestLog()
    targets: dict[str, str] = {}

    async def index(_: web.Request) -> web.Response:
        links = f'<a href="{targets["linked"]}">there</a> <a href="/redir">redirect</a>'
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def redir(_: web.Request) -> web.Response:
        raise web.HTTPFound(targets["target"])

    app1 = web.Application()
    app1.add_routes([web.get("/", index), web.get("/redir", redir)])
    async with (
        TestServer(app1, host="127.0.0.1") as one,
        TestServer(make_static_app(root, log2), host="127.0.0.2") as two,
    ):
        found = Site(str(one.make_url("")).rstrip("/"), str(two.make_url("")).rstrip("/"), log2)
        targets.update(linked=found.linked, target=found.target)
        yield found


BOTH: dict[str, Any] = {"allowed_domains": ["127.0.0.1", "127.0.0.2"]}


async def test_links_and_redirects_to_a_non_seed_private_host_are_filtered(
    db: Path, site: Site
) -> None:
    r = await crawl(db, [site.seed], **BOTH)
    assert site.log2.requests() == []  # not even robots.txt
    assert r.pages[site.seed].status == 200
    assert r.filtered[site.linked].reason == "private_address"
    # Redirect: whether the target is fetched inside the redirecting URL's fetch, or is
    # queued as a request of its own, the 127.0.0.2 URL is refused and recorded filtered.
    if site.target in r.filtered:  # the target has a record of its own
        assert r.filtered[site.target].reason == "private_address"
    else:  # the hop was refused inside the redirecting URL's fetch
        assert r.filtered[site.redirect].reason == "private_address"
    assert r.counts.filtered_by_reason == {"private_address": 2}
    assert r.report.frontier.pending == 0
    assert r.dead == {}


async def test_allow_private_fetches_them(db: Path, site: Site) -> None:
    r = await crawl(db, [site.seed], allow_private=True, **BOTH)
    requested = sorted(q.path for q in site.log2.requests() if q.path != "/robots.txt")
    assert requested == ["/linked.html", "/target.html"]
    assert r.pages[site.linked].status == 200
    assert r.filtered == {}


async def test_a_seed_on_the_other_host_is_crawled_without_the_flag(db: Path, site: Site) -> None:
    r = await crawl(db, [site.linked])
    assert r.pages[site.linked].title == "linked"
    assert [q.path for q in site.log2.requests()] == ["/robots.txt", "/linked.html"]


# -- the job setting -------------------------------------------------------------------------


def job_settings(tmp_path: Path, **cli: object) -> Settings:
    """A shared job on a SQLite frontier file (no Redis needed for the job-setting rules)."""
    base = {
        "frontier": str(tmp_path / "frontier.db"),
        "job": "guard",
        "store": str(tmp_path / "store.db"),
    }
    return Settings.build(cli={**base, **cli}, env={})


async def test_the_first_producer_fixes_the_seed_hosts_and_a_later_one_is_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = await seed(job_settings(tmp_path), [CrawlRequest("http://127.0.0.1:9/a")])
    assert (first.settings.seed_hosts, first.private_hosts) == (("127.0.0.1",), ())
    later = [
        CrawlRequest("http://127.0.0.3:9/b"),
        CrawlRequest("http://93.184.216.34:9/c"),  # public: never contacted, no lookup
        CrawlRequest("http://127.0.0.1:9/d"),
    ]
    with caplog.at_level(logging.WARNING, logger="crawlq"):
        second = await seed(job_settings(tmp_path), later)
    assert second.queued == 3
    assert second.settings.seed_hosts == ("127.0.0.1",)  # the job's, unchanged
    assert second.private_hosts == ("127.0.0.3",)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "127.0.0.3" in warnings[0] and "--allow-private" in warnings[0]
    assert "93.184.216.34" not in warnings[0]
    # a worker joining the job gets the job's guard
    fetcher = Fetcher.from_settings(second.settings)
    assert not fetcher.address_guard.allow_private
    assert fetcher.address_guard.allowed_hosts == frozenset({"127.0.0.1"})


async def test_a_job_started_with_allow_private_warns_about_nothing(tmp_path: Path) -> None:
    first = await seed(
        job_settings(tmp_path, allow_private=True), [CrawlRequest("http://127.0.0.1:9/a")]
    )
    assert first.settings.allow_private
    second = await seed(job_settings(tmp_path), [CrawlRequest("http://127.0.0.3:9/b")])
    assert second.settings.allow_private  # adopted from the job
    assert second.private_hosts == ()
    assert Fetcher.from_settings(second.settings).address_guard.allow_private
    with pytest.raises(ConfigError, match="allow_private"):  # an explicit conflict
        await seed(job_settings(tmp_path, allow_private=False), [])


def test_allow_private_comes_from_the_environment_too() -> None:
    assert Settings.build(env={"CRAWLQ_ALLOW_PRIVATE": "true"}).allow_private
    assert not Settings.build(env={}).allow_private
