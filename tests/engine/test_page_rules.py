"""What pages say (issue 13): meta refresh, canonical URL, nofollow, skipped link extensions.

Each input is served by a loopback aiohttp app; the server's `RequestLog` says what was and was
not requested (and how often), the store what was recorded.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawlq.cli.reports import print_summary
from crawlq.engine.crawl import Crawl
from crawlq.settings import Settings
from crawlq.spider import Response, Spider
from crawlq.store import open_store
from crawlq.testing import RequestLog, ServerThread
from tests.conftest import pg_schema, run_crawlq

from .conftest import FAST, Results, assert_nothing_lost, crawl

PAGES: dict[str, str] = {
    # meta refresh: a newline before the URL, resolved against <base href>
    "/refresh/start": '<base href="/dest/">'
    '<meta http-equiv="Refresh" content="0;\n  URL=target.html">'
    '<a href="/refresh/not-followed">the page of a refresh goes to no callback</a>',
    "/dest/target.html": '<a href="/refresh/start">back</a>',
    # a refresh past meta_refresh_max_delay_s is no redirect: the page is parsed as any other
    "/slow/start": '<meta http-equiv="refresh" content="101; url=/slow/never">'
    '<a href="/slow/linked">linked</a>',
    "/slow/linked": "",
    # a refresh to the page itself (no url=, or url= naming it) is no redirect
    "/self/a": '<meta http-equiv="refresh" content="5"><a href="/self/b">b</a>',
    "/self/b": '<meta http-equiv="refresh" content="0; url=\'/self/b#top\'">',
    # a refresh loop: dedup ends it
    "/loop/a": '<meta http-equiv="refresh" content="0; url=/loop/b">',
    "/loop/b": '<meta http-equiv="refresh" content="0; url=/loop/a">',
    # canonical
    "/canon/page": '<base href="/canon/sub/"><link rel="alternate" href="/alt">'
    '<link href="../the-one?b=2#frag" rel="Canonical">',
    "/canon/bad": '<link rel="canonical" href="javascript:void(0)">',
    "/canon/none": "",
    # nofollow
    "/nf/index": '<a href="/nf/followed">f</a><a rel="nofollow" href="/nf/skipped">s</a>'
    '<a rel="external NoFollow" href="/nf/skipped2">s2</a>'
    '<a rel="nofollow" href="/nf/both">b1</a><a href="/nf/both">b2</a>'
    '<a href="/nf/robots">robots nofollow</a><a href="/nf/none">robots none</a>',
    "/nf/followed": "",
    "/nf/skipped": "",
    "/nf/skipped2": "",
    "/nf/both": "",
    "/nf/robots": '<meta name="ROBOTS" content="noindex, NoFollow"><a href="/nf/from-robots">x</a>',
    "/nf/none": '<body><p>late meta</p><meta name="robots" content="none">'
    '<a href="/nf/from-none">x</a>',
    "/nf/from-robots": "",
    "/nf/from-none": "",
    # extensions
    "/ext/index": '<a href="/files/manual.pdf">pdf</a><a href="/files/logo.PNG?v=2">png</a>'
    '<a href="/files/manual.pdf#p2">pdf again</a><a href="/ext/page.html">page</a>',
    "/ext/page.html": "",
    # out of scope first, then the extension, then nofollow (issue 23.8e)
    "/ext/offsite": '<a href="http://other.example/report.pdf">offsite pdf</a>'
    '<a href="http://other.example/page.html">offsite page</a>'
    '<a rel="nofollow" href="http://other.example/nf.html">offsite nofollow</a>'
    '<a rel="nofollow" href="/files/manual.pdf">onsite pdf, nofollow</a>'
    '<a rel="nofollow" href="/ext/page.html">onsite nofollow</a>',
}


def _chain(request: web.Request) -> web.Response:
    n = int(request.match_info["n"])
    return _page(f'<meta http-equiv="refresh" content="0; url=/chain/{n + 1}">', f"chain {n}")


def _page(body: str, title: str) -> web.Response:
    return web.Response(
        text=f"<!doctype html><html><head><title>{title}</title>{body}</html>",
        content_type="text/html",
    )


def page_rules_app(log: RequestLog) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/files/"):
            return web.Response(body=b"%PDF-1.4 binary", content_type="application/octet-stream")
        body = PAGES.get(request.path)
        if body is None:
            raise web.HTTPNotFound()
        return _page(body, request.path)

    async def chain(request: web.Request) -> web.StreamResponse:
        return _chain(request)

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/chain/{n:\\d+}", chain)
    app.router.add_get("/{path:.*}", handle)
    return app


@pytest.fixture
async def site(log: RequestLog) -> AsyncIterator[str]:
    async with TestServer(page_rules_app(log), host="127.0.0.1") as server:
        yield str(server.make_url("")).rstrip("/")


def requested(log: RequestLog) -> list[str]:
    return sorted(r.path for r in log.requests() if r.path != "/robots.txt")


def summary(results: Results) -> str:
    out = io.StringIO()
    print_summary(results.report, out)
    return out.getvalue()


# -- meta refresh ----------------------------------------------------------------------------


async def test_a_meta_refresh_is_a_redirect_resolved_against_base_href(
    db: Path, site: str, log: RequestLog
) -> None:
    start, target = f"{site}/refresh/start", f"{site}/dest/target.html"
    r = await crawl(db, [start])
    assert_nothing_lost(r, [start, target])
    # the target once (its link back to the start is a duplicate); the start's own link is
    # not followed: a redirecting page goes to no callback
    assert requested(log) == ["/dest/target.html", "/refresh/start"]
    page = r.pages[start]
    assert (page.status, page.title, page.final_url, page.error) == (
        200,
        "/refresh/start",
        target,
        None,
    )
    assert r.pages[target].final_url == target
    assert r.pages[target].depth == 0  # a hop keeps the depth, as a 3xx does


async def test_a_meta_refresh_counts_toward_max_redirects(
    db: Path, site: str, log: RequestLog
) -> None:
    r = await crawl(db, [f"{site}/chain/0"], max_redirects=3)
    chain = [f"{site}/chain/{n}" for n in range(4)]
    assert_nothing_lost(r, chain)
    assert requested(log) == [f"/chain/{n}" for n in range(4)]  # each once, /chain/4 never
    assert [r.outcome(url) for url in chain] == ["page", "page", "page", "dead"]
    assert r.dead[chain[3]].reason == "too_many_redirects"
    assert [r.pages[url].final_url for url in chain[:3]] == chain[1:]


async def test_a_meta_refresh_loop_ends(db: Path, site: str, log: RequestLog) -> None:
    a, b = f"{site}/loop/a", f"{site}/loop/b"
    r = await crawl(db, [a])
    assert_nothing_lost(r, [a, b])
    assert requested(log) == ["/loop/a", "/loop/b"]
    assert (r.pages[a].final_url, r.pages[b].final_url) == (b, a)


async def test_a_meta_refresh_past_the_max_delay_is_not_followed(
    db: Path, site: str, log: RequestLog
) -> None:
    start, linked = f"{site}/slow/start", f"{site}/slow/linked"
    r = await crawl(db, [start])
    assert_nothing_lost(r, [start, linked])
    assert requested(log) == ["/slow/linked", "/slow/start"]
    assert r.pages[start].final_url == start

    log.clear()
    again = await crawl(db.with_name("again.db"), [start], meta_refresh_max_delay_s=101)
    assert_nothing_lost(again, [start, f"{site}/slow/never"])
    assert requested(log) == ["/slow/never", "/slow/start"]


async def test_meta_refresh_off_parses_the_page_as_any_other(
    db: Path, site: str, log: RequestLog
) -> None:
    start = f"{site}/refresh/start"
    r = await crawl(db, [start], meta_refresh=False)
    assert_nothing_lost(r, [start, f"{site}/refresh/not-followed"])  # a 404 page
    assert requested(log) == ["/refresh/not-followed", "/refresh/start"]
    assert r.pages[start].final_url == start


async def test_a_refresh_of_the_page_itself_is_not_a_redirect(
    db: Path, site: str, log: RequestLog
) -> None:
    a, b = f"{site}/self/a", f"{site}/self/b"
    r = await crawl(db, [a])
    assert_nothing_lost(r, [a, b])
    assert requested(log) == ["/self/a", "/self/b"]
    assert (r.pages[a].final_url, r.pages[b].final_url) == (a, b)


# -- canonical -------------------------------------------------------------------------------


async def test_the_canonical_url_is_stored_resolved_against_base(db: Path, site: str) -> None:
    urls = [f"{site}/canon/page", f"{site}/canon/bad", f"{site}/canon/none"]
    r = await crawl(db, urls)
    assert_nothing_lost(r, urls)
    assert [r.pages[url].canonical_url for url in urls] == [f"{site}/canon/the-one?b=2", None, None]


@pytest.fixture
async def pg_store(postgres_url: str) -> AsyncIterator[str]:
    async with pg_schema(postgres_url) as schema:
        yield f"{postgres_url}{'&' if '?' in postgres_url else '?'}options=-csearch_path%3D{schema}"


async def test_the_canonical_url_is_stored_in_postgresql(
    pg_store: str, site: str, tmp_path: Path
) -> None:
    urls = [f"{site}/canon/page", f"{site}/canon/none"]
    cli = {
        **FAST,
        "store": pg_store,
        "frontier": str(tmp_path / "frontier.db"),
        "job": f"canon-{uuid.uuid4().hex[:8]}",
    }
    report = await Crawl(Settings.build(cli=cli, env={}), urls).run()
    assert report.store.pages == 2
    store = await open_store(pg_store)
    try:
        pages = {p.url: p.canonical_url async for p in store.pages()}
    finally:
        await store.close()
    assert pages == {urls[0]: f"{site}/canon/the-one?b=2", urls[1]: None}


# -- nofollow --------------------------------------------------------------------------------

NOFOLLOW_SKIPPED = ["/nf/from-none", "/nf/from-robots", "/nf/skipped", "/nf/skipped2"]
NOFOLLOW_FOLLOWED = ["/nf/both", "/nf/followed", "/nf/index", "/nf/none", "/nf/robots"]


async def test_the_default_spider_honours_nofollow_when_obeying_robots(
    db: Path, site: str, log: RequestLog
) -> None:
    r = await crawl(db, [f"{site}/nf/index"])
    assert_nothing_lost(r, [site + path for path in NOFOLLOW_FOLLOWED])
    assert requested(log) == NOFOLLOW_FOLLOWED
    assert r.report.counters.skipped == {"nofollow": 4}
    assert "links not followed: 4 (nofollow 4)" in summary(r)


async def test_nofollow_links_are_followed_when_robots_rules_are_ignored(
    db: Path, site: str, log: RequestLog
) -> None:
    r = await crawl(db, [f"{site}/nf/index"], obey_robots=False)
    every = sorted(NOFOLLOW_FOLLOWED + NOFOLLOW_SKIPPED)
    assert_nothing_lost(r, [site + path for path in every])
    assert requested(log) == every
    assert r.report.counters.skipped == {}


class FollowsNofollow(Spider):
    """Overrides the default: follows every link, nofollow ones included."""

    def parse(self, response: Response):
        yield from response.follow_all(response.links())


async def test_a_spider_can_follow_nofollow_links(db: Path, site: str, log: RequestLog) -> None:
    r = await crawl(db, [f"{site}/nf/index"], FollowsNofollow)
    assert requested(log) == sorted(NOFOLLOW_FOLLOWED + NOFOLLOW_SKIPPED)
    assert r.report.counters.skipped == {}


# -- skipped extensions ----------------------------------------------------------------------


async def test_links_with_a_skipped_extension_are_not_requested_and_counted(
    db: Path, site: str, log: RequestLog
) -> None:
    index, page = f"{site}/ext/index", f"{site}/ext/page.html"
    r = await crawl(db, [index])
    assert_nothing_lost(r, [index, page])
    assert requested(log) == ["/ext/index", "/ext/page.html"]
    assert r.report.counters.skipped == {"extension": 2}  # the pdf (twice linked) and the png
    assert "links not followed: 2 (extension 2)" in summary(r)


async def test_a_link_out_of_scope_is_counted_offsite_before_its_extension_or_nofollow(
    db: Path, site: str, log: RequestLog
) -> None:
    start = f"{site}/ext/offsite"
    r = await crawl(db, [start])
    assert_nothing_lost(r, [start])
    assert requested(log) == ["/ext/offsite"]
    # the offsite pdf, page and nofollow link are offsite (scope first); the onsite pdf is
    # an extension (before its nofollow); the onsite nofollow page is nofollow
    assert r.report.counters.skipped == {"offsite": 3, "extension": 1, "nofollow": 1}
    assert "links not followed: 5 (offsite 3, extension 1, nofollow 1)" in summary(r)


async def test_the_skipped_extensions_are_a_setting(db: Path, site: str, log: RequestLog) -> None:
    index = f"{site}/ext/index"
    r = await crawl(db, [index], skip_extensions=("PNG",))
    assert requested(log) == ["/ext/index", "/ext/page.html", "/files/manual.pdf"]
    assert r.report.counters.skipped == {"extension": 1}

    log.clear()
    every = await crawl(db.with_name("all.db"), [index], skip_extensions=())
    assert requested(log) == [
        "/ext/index",
        "/ext/page.html",
        "/files/logo.PNG",
        "/files/manual.pdf",
    ]
    assert every.report.counters.skipped == {}
    assert every.pages[f"{site}/files/manual.pdf"].status == 200


# -- the command line ------------------------------------------------------------------------


def test_the_command_line_options(tmp_path: Path) -> None:
    log = RequestLog()
    with ServerThread(page_rules_app(log)) as server:
        seeds = [f"{server.base_url}/refresh/start", f"{server.base_url}/ext/index"]
        store = tmp_path / "cli.db"
        args = ["--store", str(store), "--delay", "0", "--ignore-robots", "--max-depth", "1"]
        proc = run_crawlq("crawl", *seeds, *args, "--no-meta-refresh", "--skip-extensions", "png")
    assert requested(log) == [
        "/ext/index",
        "/ext/page.html",
        "/files/manual.pdf",
        "/refresh/not-followed",
        "/refresh/start",
    ]
    assert "links not followed: 1 (extension 1)" in proc.stdout
