"""Sitemaps end to end on the embedded engine (and one Redis-frontier run): what the loopback
server saw, and what the store holds."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from crawlq.engine.crawl import Crawl
from crawlq.errors import ConfigError
from crawlq.frontier import open_frontier
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.spider import Response, Spider
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.engine.conftest import FAST, Results, read_store
from tests.engine.sitemap_site import SitemapSite, put_gzipped_index, url_entry, urlset


@pytest.fixture
def site() -> SitemapSite:
    return SitemapSite()


@pytest.fixture
async def base(site: SitemapSite) -> AsyncIterator[str]:
    async with TestServer(site.app(), host="127.0.0.1") as server:
        yield str(server.make_url("")).rstrip("/")


async def crawl_sitemaps(
    store: Path,
    seeds: Sequence[str] = (),
    sitemaps: Sequence[str] = (),
    spider_cls: type[Spider] = Spider,
    **settings: Any,
) -> Results:
    cli = {**FAST, "store": str(store), **settings}
    crawl = Crawl(Settings.build(cli=cli, env={}), seeds, spider_cls, sitemaps=sitemaps)
    report = await crawl.run()
    pages, dead, filtered, rest = await read_store(store)
    return Results(report, pages, dead, filtered, rest["items"], rest["counts"])


class Recorder(Spider):
    """Pages listed in sitemaps go to ``parse_page`` (a sitemap rule), which records meta."""

    name = "recorder"
    sitemap_rules = [(r"/p/", "parse_page")]

    def parse_page(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {
            "url": response.url,
            "lastmod": response.meta.get("sitemap_lastmod"),
            "depth": response.depth,
        }


@pytest.mark.parametrize("frontier", ["sqlite", "redis"])
async def test_an_index_of_two_gzipped_sitemaps(
    frontier: str,
    site: SitemapSite,
    base: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    put_gzipped_index(site, base)
    shared: dict[str, Any] = {}
    if frontier == "redis":
        shared = {"frontier": request.getfixturevalue("redis_url")}
        shared["job"] = request.getfixturevalue("job")
    results = await crawl_sitemaps(
        tmp_path / "s.db", sitemaps=[f"{base}/sitemap_index.xml"], spider_cls=Recorder, **shared
    )
    assert Counter(site.paths()) == Counter(
        ["/robots.txt", "/sitemap_index.xml", "/s1.xml.gz", "/s2.xml"]
        + [f"/p/{n}" for n in range(1, 6)]
    )  # every file once: /p/1, listed twice, too
    pages = [f"{base}/p/1", f"{base}/p/2?a=1&b=2", f"{base}/p/3", f"{base}/p/4", f"{base}/p/5"]
    sitemaps = [f"{base}/sitemap_index.xml", f"{base}/s1.xml.gz", f"{base}/s2.xml"]
    assert set(results.pages) == set(pages) | set(sitemaps)
    assert [results.pages[u].error for u in sitemaps] == [None, None, None]
    assert all(results.pages[u].status == 200 and results.pages[u].depth == 0 for u in pages)
    assert results.dead == {} and results.filtered == {}
    lastmods = {item.data["url"]: item.data["lastmod"] for item in results.items}
    assert lastmods == {
        pages[0]: "2024-01-01",
        pages[1]: None,
        pages[2]: None,
        pages[3]: "2024-02-02T10:00:00+00:00",
        pages[4]: None,
    }
    assert {item.data["depth"] for item in results.items} == {0}
    assert results.report.frontier.pending == 0


async def test_sitemap_priority_orders_the_fetches(
    site: SitemapSite, base: str, tmp_path: Path
) -> None:
    site.put(
        "/sitemap.xml",
        urlset(
            url_entry(f"{base}/p/low", priority="0.1"),
            url_entry(f"{base}/p/top", priority="1.0"),
            url_entry(f"{base}/p/default"),
            url_entry(f"{base}/p/high", priority="0.8"),
            url_entry(f"{base}/p/zero", priority="0.0"),
            url_entry(f"{base}/p/default2", priority="0.5"),
        ),
    )
    results = await crawl_sitemaps(tmp_path / "s.db", sitemaps=[f"{base}/sitemap.xml"])
    assert len(results.pages) == 7
    fetched = [p for p in site.paths() if p.startswith("/p/")]
    # host concurrency 1: by priority (1.0 -> +5 ... 0.0 -> -5), first in, first out within one
    assert fetched == ["/p/top", "/p/high", "/p/default", "/p/default2", "/p/low", "/p/zero"]


async def test_a_sitemap_of_60000_urls_queues_the_first_50000(
    site: SitemapSite, base: str, tmp_path: Path
) -> None:
    entries = [f"<url><loc>{base}/p/{n}</loc></url>" for n in range(60_000)]
    site.put("/big.xml", urlset(*entries))
    store = tmp_path / "s.db"
    # max_pages 1: stop once the sitemap itself is stored, and look at what it queued; a parse
    # budget of 120 s: the cap is under test, not the machine's speed (traced, loaded: > 10 s)
    results = await crawl_sitemaps(
        store, sitemaps=[f"{base}/big.xml"], max_pages=1, parse_timeout_s=120
    )
    assert site.paths() == ["/robots.txt", "/big.xml"]
    page = results.pages[f"{base}/big.xml"]
    assert page.error == "sitemap_too_many_urls: 50000 of 60000"
    assert results.report.counters.skipped["sitemap_too_many_urls"] == 10_000
    stats = results.report.frontier
    assert (stats.queued, stats.done, stats.seen) == (50_000, 1, 50_001)
    frontier = await open_frontier(str(store))
    try:  # the first 50,000 are known to the frontier, the rest are not
        assert await frontier.push([CrawlRequest(f"{base}/p/0")]) == 0
        assert await frontier.push([CrawlRequest(f"{base}/p/49999")]) == 0
        assert await frontier.push([CrawlRequest(f"{base}/p/50000")]) == 1
        assert await frontier.push([CrawlRequest(f"{base}/p/59999")]) == 1
    finally:
        await frontier.close()


@pytest.fixture
async def other_base(site: SitemapSite) -> AsyncIterator[tuple[SitemapSite, str]]:
    """A second server, on 127.0.0.2: a private address that is not a seed host."""
    other = SitemapSite()
    async with TestServer(other.app(), host="127.0.0.2") as server:
        yield other, str(server.make_url("")).rstrip("/")


async def test_robots_txt_sitemap_lines_with_follow_sitemaps(
    site: SitemapSite, base: str, other_base: tuple[SitemapSite, str], tmp_path: Path
) -> None:
    other, base2 = other_base
    site.robots = (
        "User-agent: *\nDisallow: /private/\n"
        "Sitemap: /sm.xml\n"  # relative: resolved against robots.txt
        f"Sitemap: {base}/sm2.txt\n"
        f"Sitemap: {base2}/elsewhere.xml\n"
    )
    site.put(
        "/sm.xml",
        urlset(
            url_entry(f"{base}/p/1"),
            url_entry(f"{base}/p/2"),
            url_entry(f"{base}/private/x"),  # disallowed by robots.txt
            url_entry(f"{base2}/p/9"),  # in scope, on a private address of no seed host
        ),
    )
    site.put("/sm2.txt", f"{base}/p/3\n{base}/p/1\n".encode(), content_type="text/plain")
    other.put("/elsewhere.xml", urlset(url_entry(f"{base2}/p/8")))
    results = await crawl_sitemaps(
        tmp_path / "s.db",
        seeds=[f"{base}/p/0"],
        follow_sitemaps=True,
        allowed_domains=("127.0.0.1", "127.0.0.2"),
    )
    assert Counter(site.paths()) == Counter(
        ["/robots.txt", "/p/0", "/sm.xml", "/sm2.txt", "/p/1", "/p/2", "/p/3"]
    )
    assert other.paths() == []  # the guard sent nothing to 127.0.0.2
    assert set(results.pages) == {f"{base}/p/{n}" for n in range(4)} | {
        f"{base}/sm.xml",
        f"{base}/sm2.txt",
    }
    assert {u: f.reason for u, f in results.filtered.items()} == {
        f"{base}/private/x": "robots_txt",
        f"{base2}/p/9": "private_address",
        f"{base2}/elsewhere.xml": "private_address",
    }
    assert results.dead == {}
    assert results.report.frontier.pending == 0


async def test_robots_txt_sitemaps_are_not_read_without_follow_sitemaps(
    site: SitemapSite, base: str, tmp_path: Path
) -> None:
    site.robots = "User-agent: *\nSitemap: /sm.xml\n"
    site.put("/sm.xml", urlset(url_entry(f"{base}/p/1")))
    results = await crawl_sitemaps(tmp_path / "s.db", seeds=[f"{base}/p/0"])
    assert site.paths() == ["/robots.txt", "/p/0"]
    assert set(results.pages) == {f"{base}/p/0"}


async def test_broken_and_refused_sitemaps_are_recorded_never_a_crash(
    site: SitemapSite, base: str, tmp_path: Path
) -> None:
    site.put(
        "/bad.xml",
        urlset(
            url_entry(f"{base}/p/1"), "<url><loc>oops & more</loc></url>", url_entry(f"{base}/p/2")
        ),
    )
    laughs = '<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    site.put(
        "/lol.xml",
        f'<?xml version="1.0"?><!DOCTYPE urlset [{laughs}]><urlset><url><loc>{base}/p/&b;'
        "</loc></url></urlset>".encode(),
    )
    site.put(
        "/page.html", b"<!DOCTYPE html><html><body><a href='/p/7'>x</a></body></html>", "text/html"
    )
    site.put("/corrupt.xml.gz", b"\x1f\x8b\x08\x00garbage", "application/gzip")
    site.put_status("/moved.xml", 301, Location="/real.xml")
    site.put("/real.xml", urlset(url_entry(f"{base}/p/3")))
    site.put("/private/sitemap.xml", urlset(url_entry(f"{base}/p/4")))
    names = ["bad.xml", "lol.xml", "page.html", "corrupt.xml.gz", "missing.xml", "moved.xml"]
    names.append("private/sitemap.xml")
    results = await crawl_sitemaps(tmp_path / "s.db", sitemaps=[f"{base}/{n}" for n in names])
    errors = {u.removeprefix(base + "/"): p.error for u, p in results.pages.items()}
    assert errors == {
        "bad.xml": "sitemap_bad_xml: not well-formed (invalid token) at line 4, column 16",
        "lol.xml": "sitemap_bad_xml: DOCTYPE 'urlset' refused (DTDs are not read)",
        "page.html": "sitemap_unknown_format: an HTML document",
        "corrupt.xml.gz": errors["corrupt.xml.gz"],
        "missing.xml": "http_404",
        "moved.xml": None,  # a redirect: its target is read as a sitemap
        "real.xml": None,
        "p/1": None,  # listed before the XML broke
        "p/3": None,
    }
    assert errors["corrupt.xml.gz"] is not None
    assert errors["corrupt.xml.gz"].startswith("sitemap_gzip_error:")
    assert results.pages[f"{base}/moved.xml"].status == 301
    assert {u: f.reason for u, f in results.filtered.items()} == {
        f"{base}/private/sitemap.xml": "robots_txt"
    }
    paths = Counter(site.paths())
    assert paths["/private/sitemap.xml"] == 0
    assert paths["/p/2"] == paths["/p/4"] == paths["/p/7"] == 0
    assert max(paths.values()) == 1
    assert results.dead == {}
    assert results.report.frontier.pending == 0


async def test_sitemap_hosts_are_the_scope_and_the_guard_exemption(
    site: SitemapSite, base: str, other_base: tuple[SitemapSite, str], tmp_path: Path
) -> None:
    """A crawl with only a sitemap: its host is the seed host (in scope, not refused as
    private); a URL it lists on another host is offsite, counted, never requested."""
    other, base2 = other_base
    site.put("/sitemap.xml", urlset(url_entry(f"{base}/p/1"), url_entry(f"{base2}/p/2")))
    results = await crawl_sitemaps(tmp_path / "s.db", sitemaps=[f"{base}/sitemap.xml"])
    assert set(results.pages) == {f"{base}/sitemap.xml", f"{base}/p/1"}
    assert results.report.counters.skipped == Counter({"offsite": 1})
    assert other.paths() == []


class _Follow(Spider):
    sitemap_follow = [r"/products-"]
    sitemap_rules = [(r"/p/item", "parse_item"), (r"/p/", "parse")]

    def parse_item(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"item": response.url}


async def test_sitemap_follow_and_rules_choose_what_is_read(
    site: SitemapSite, base: str, tmp_path: Path
) -> None:
    from tests.engine.sitemap_site import sitemap_index

    site.put("/index.xml", sitemap_index(f"{base}/products-1.xml", f"{base}/news.xml"))
    site.put(
        "/products-1.xml",
        urlset(url_entry(f"{base}/p/item1"), url_entry(f"{base}/p/other"), url_entry(f"{base}/x")),
    )
    site.put("/news.xml", urlset(url_entry(f"{base}/p/news")))
    results = await crawl_sitemaps(
        tmp_path / "s.db", sitemaps=[f"{base}/index.xml"], spider_cls=_Follow
    )
    assert Counter(site.paths()) == Counter(
        ["/robots.txt", "/index.xml", "/products-1.xml", "/p/item1", "/p/other"]
    )
    assert [i.data for i in results.items] == [{"item": f"{base}/p/item1"}]
    assert results.report.counters.skipped == Counter({"sitemap_follow": 1, "sitemap_rules": 1})


class _BadRule(Spider):
    sitemap_rules = [(r"/p/", "_private")]


async def test_a_sitemap_rule_naming_no_public_method_stops_the_crawl_before_it_starts(
    site: SitemapSite, base: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="'_private' is not a public method"):
        await crawl_sitemaps(tmp_path / "s.db", sitemaps=[f"{base}/x.xml"], spider_cls=_BadRule)
    assert site.paths() == []
    assert not (tmp_path / "s.db").exists()


@pytest.mark.e2e  # crawlq processes, seconds each: out of the fast lane
def test_cli_crawl_with_only_sitemaps_and_a_bad_one(tmp_path: Path) -> None:
    site = SitemapSite()
    with ServerThread(site.app()) as server:
        base = server.base_url
        site.put("/sitemap.xml.gz", gzip.compress(f"{base}/p/1\n{base}/p/2\n".encode()))
        store = tmp_path / "c.db"
        proc = run_crawlq(
            "crawl", "--sitemap", f"{base}/sitemap.xml.gz", "--store", str(store),
            "--delay", "0", "-q",
        )  # fmt: skip
        assert "pages stored: 3" in proc.stdout, proc.stdout
        assert Counter(site.paths()) == Counter(["/robots.txt", "/sitemap.xml.gz", "/p/1", "/p/2"])
    bad = run_crawlq("crawl", "--sitemap", "ftp://x/s.xml", "--store", str(store), check=False)
    assert bad.returncode == 2
    assert "--sitemap" in bad.stderr
    none = run_crawlq("crawl", "--store", str(tmp_path / "n.db"), check=False)
    assert none.returncode == 2
    assert "--sitemap" in none.stderr


def test_follow_sitemaps_needs_robots_txt() -> None:
    proc = run_crawlq(
        "crawl", "http://127.0.0.1:1/", "--follow-sitemaps", "--ignore-robots", check=False
    )
    assert proc.returncode == 2
    assert "--follow-sitemaps" in proc.stderr


@pytest.mark.e2e  # crawlq processes, seconds each: out of the fast lane
def test_cli_seed_a_sitemap_into_a_shared_job(tmp_path: Path, redis_url: str, job: str) -> None:
    site = SitemapSite()
    with ServerThread(site.app()) as server:
        base = server.base_url
        site.put("/sitemap.xml", urlset(url_entry(f"{base}/p/1"), url_entry(f"{base}/p/2")))
        store = str(tmp_path / "j.db")
        seeded = run_crawlq(
            "seed", "--frontier", redis_url, "--job", job, "--store", store, "--delay", "0",
            "--sitemap", f"{base}/sitemap.xml",
        )  # fmt: skip
        assert "queued 1 new of 1" in seeded.stdout
        run_crawlq(
            "worker", "--frontier", redis_url, "--job", job, "--store", store,
            "--exit-when-done", "--processes", "1", "-q",
        )  # fmt: skip
        assert Counter(site.paths()) == Counter(["/robots.txt", "/sitemap.xml", "/p/1", "/p/2"])
    out = run_crawlq("export", "--store", store, "--what", "pages").stdout
    assert sorted(json.loads(line)["url"] for line in out.splitlines()) == [
        f"{base}/p/1",
        f"{base}/p/2",
        f"{base}/sitemap.xml",
    ]
