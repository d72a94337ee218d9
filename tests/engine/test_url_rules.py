"""URL rules as browsers apply them, and crawler traps (README "URL rules and crawler traps").

Every test crawls a loopback server that logs the request targets exactly as received
(`tests.engine.rawsite.RawSite`), and reads back the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crawlq.spider import Response, Spider

from .conftest import assert_nothing_lost, crawl
from .rawsite import RawSite, response

OK = response("<title>ok</title>")
CP1252 = ((b"Content-Type", b"text/html; charset=windows-1252"),)


# -- link queries in the page's encoding -------------------------------------------------------


async def test_a_windows_1252_page_encodes_its_link_queries_in_windows_1252(db: Path) -> None:
    """WHATWG URL "query state": the query in the document's encoding, the path in UTF-8."""
    legacy = (
        '<a href="/s?q=crème">q</a> <a href="/café/?q=crème">path</a>'
        '<a href="/t?q=&#20013;">not in windows-1252</a> <a href="/ascii?q=1">ascii</a>'
    ).encode("cp1252")
    utf8 = '<a href="/u?q=crème">u</a>'

    def answer(target: bytes) -> bytes:
        if target == b"/legacy":
            return response(legacy, headers=CP1252)
        if target == b"/utf8":
            return response(utf8)
        return OK

    async with RawSite(answer) as site:
        seeds = [f"{site.base}/legacy", f"{site.base}/utf8"]
        r = await crawl(db, seeds, obey_robots=False)
    expected = [
        b"/s?q=cr%E8me",
        b"/caf%C3%A9/?q=cr%E8me",
        b"/t?q=%26%2320013%3B",  # the character reference, percent-encoded
        b"/ascii?q=1",
        b"/u?q=cr%C3%A8me",
    ]
    assert sorted(site.targets) == sorted([b"/legacy", b"/utf8", *expected])
    assert_nothing_lost(r, seeds + [site.base + t.decode() for t in expected])


class FollowsByHand(Spider):
    """Follows links it builds itself, as spiders do, on a windows-1252 page."""

    def parse(self, response: Response) -> Iterator[Any]:
        if response.url.endswith("/legacy"):
            yield response.follow("/f?q=crème")
            yield response.follow(response.urljoin("g?q=é"))
            yield response.follow("h\\i?q=ü")  # a backslash is a slash in http(s) URLs


async def test_spider_follow_and_urljoin_use_the_page_encoding(db: Path) -> None:
    legacy = "<title>legacy</title>".encode("cp1252")

    def answer(target: bytes) -> bytes:
        return response(legacy, headers=CP1252) if target == b"/d/legacy" else OK

    async with RawSite(answer) as site:
        r = await crawl(db, [f"{site.base}/d/legacy"], FollowsByHand, obey_robots=False)
    followed = [b"/f?q=cr%E8me", b"/d/g?q=%E9", b"/d/h/i?q=%FC"]
    assert sorted(site.targets) == sorted([b"/d/legacy", *followed])
    assert set(r.pages) == {f"{site.base}{t.decode()}" for t in [b"/d/legacy", *followed]}


# -- Location as browsers read it ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "landed"),
    [
        (b"///127.0.0.1:{port}/landed", b"/landed"),
        (b"\\\\127.0.0.1:{port}\\landed", b"/landed"),
        (b"http:\\\\127.0.0.1:{port}/landed", b"/landed"),
        (b"/\\127.0.0.1:{port}/landed", b"/landed"),
        (b"http:landed", b"/dir/landed"),  # same scheme, no slashes: a relative path
        (b"/caf\xe9", b"/caf%E9"),  # latin-1 bytes: each byte percent-encoded
        (b"/caf\xc3\xa9", b"/caf%C3%A9"),  # raw UTF-8
        (b"/caf\xc3\xa9/\xff\xfe%zz ?q=\x01x\x01", b"/caf%C3%A9/%FF%FE%zz%20?q=%01x"),
    ],
    ids=[
        "triple-slash",
        "backslashes",
        "scheme-backslashes",
        "slash-backslash",
        "http-colon",
        "latin-1",
        "utf-8",
        "mixed-bytes",
    ],
)
async def test_a_location_is_resolved_as_browsers_resolve_it(
    db: Path, location: bytes, landed: bytes
) -> None:
    def answer(target: bytes) -> bytes:
        if target == b"/dir/start":
            value = location.replace(b"{port}", str(site.port).encode())
            return response(status=302, headers=[(b"Location", value)])
        return OK

    site = RawSite(answer)  # the Location may name the server's own port
    async with site:
        r = await crawl(db, [f"{site.base}/dir/start"], obey_robots=False)
    assert site.targets == [b"/dir/start", landed]
    target = site.base + landed.decode()
    assert r.pages[f"{site.base}/dir/start"].final_url == target
    assert r.pages[target].status == 200
    assert r.dead == {}


# -- no header content can end as internal_error -------------------------------------------------

HOSTILE_HEADERS: dict[bytes, bytes] = {
    b"/ct-latin1": response(
        "<title>t</title>", headers=[(b"Content-Type", b"text/html; charset=\xe9\xff")]
    ),
    b"/ct-bytes": response("x", headers=[(b"Content-Type", b"text/\xff\xfe")]),
    b"/text-charset": response("x", headers=[(b"Content-Type", b"text/plain; charset=\xff")]),
    b"/other": response("<title>t</title>", headers=[(b"X-Note", b"\x80\x81\xc3")]),
    b"/retry-superscript": response(status=503, headers=[(b"Retry-After", b"\xc2\xb2")]),
    b"/retry-arabic": response(status=503, headers=[(b"Retry-After", "٣".encode())]),
    b"/retry-huge": response(status=429, headers=[(b"Retry-After", b"9" * 5000)]),
    b"/retry-date": response(
        status=503, headers=[(b"Retry-After", b"Fri, 31 Dec 99999 23:59:59 GMT")]
    ),
    b"/multiple-choices": response(status=300, headers=[(b"Location", b"/caf\xe9")]),
    b"/empty-location": response(status=301, headers=[(b"Location", b"")]),
    b"/two-locations": response(
        status=302, headers=[(b"Location", b"/first"), (b"Location", b"/second")]
    ),
    b"/bad-host-location": response(status=302, headers=[(b"Location", b"http://\xff\xfe/")]),
    b"/encoding": response("x", headers=[(b"Content-Encoding", b"\xff")]),
}


async def test_no_header_content_ends_as_an_internal_error(db: Path) -> None:
    """QA: a Location in latin-1 bytes, a Retry-After of "²" or 5,000 digits, a Content-Type
    in raw bytes... each URL ends as one page, dead letter or filtered record, never as
    ``internal_error`` and never failing the store write of its batch."""

    def answer(target: bytes) -> bytes:
        return HOSTILE_HEADERS.get(target, OK)

    async with RawSite(answer) as site:
        seeds = [site.base + path.decode() for path in HOSTILE_HEADERS]
        r = await crawl(db, seeds, obey_robots=False, max_retries=0, max_retry_after_s=1.0)
    reasons = {url.removeprefix(site.base): d.reason for url, d in r.dead.items()}
    assert "internal_error" not in reasons.values(), reasons
    for url in seeds:
        r.outcome(url)
    assert r.pages[f"{site.base}/ct-latin1"].title == "t"
    assert r.pages[f"{site.base}/multiple-choices"].error == "redirect_not_followed: /caf\xe9"
    assert r.pages[f"{site.base}/two-locations"].final_url == f"{site.base}/first"
    assert site.count(b"/first") == 1 and site.count(b"/second") == 0
    assert reasons["/retry-superscript"] == reasons["/retry-arabic"] == "http_503"
    assert reasons["/retry-huge"] == "retry_after_too_long"
    assert reasons["/bad-host-location"] == "bad_redirect"


# -- session identifiers ---------------------------------------------------------------------------


class MintsSessionIds:
    """A site that puts a new session id in every link of every page it serves."""

    PAGES = (b"/", b"/a", b"/b?x=1", b"/c", b"/d", b"/e", b"/e2")

    def __init__(self) -> None:
        self.minted = 0

    def __call__(self, target: bytes) -> bytes:
        self.minted += 1
        n = self.minted
        if target == b"/e":  # a redirect whose target carries one too
            return response(status=302, headers=[(b"Location", b"/e2;JSESSIONID=R%d" % n)])
        links = (
            f'<a href="/a;jsessionid={n}A">a</a> <a href="/b?PHPSESSID={n}&x=1">b</a>'
            f'<a href="/c?utm_source=s{n}&utm_medium=m">c</a> <a href="/d?sid={n}">d</a>'
            f'<a href="/e?sessionid={n}">e</a> <a href="/?sid={n}">home</a>'
        )
        return response(links)


async def test_session_ids_are_stripped_so_only_the_real_pages_are_requested(db: Path) -> None:
    site_answer = MintsSessionIds()
    async with RawSite(site_answer) as site:
        seed = f"{site.base}/;jsessionid=SEED?utm_campaign=c"
        r = await crawl(db, [seed], obey_robots=False)
    assert sorted(site.targets) == sorted(MintsSessionIds.PAGES)  # each real page once
    urls = {site.base + p.decode() for p in MintsSessionIds.PAGES}
    assert_nothing_lost(r, urls)
    assert r.pages[f"{site.base}/e"].final_url == f"{site.base}/e2"


async def test_an_empty_strip_list_keeps_session_ids(db: Path) -> None:
    async with RawSite(MintsSessionIds()) as site:
        r = await crawl(db, [f"{site.base}/"], obey_robots=False, strip_url_params=[], max_depth=2)
    assert b"/a;jsessionid=1A" in site.targets
    assert len(r.pages) > len(MintsSessionIds.PAGES)


# -- traps: repeated segments, many query parameters -----------------------------------------------


def soft_404(target: bytes) -> bytes:
    """Every path answers the same page with a relative link: /x/, /x/a/b/, /x/a/b/a/b/, …"""
    return response('<a href="a/b/">deeper</a>')


async def test_a_path_repeating_its_segments_is_not_followed(db: Path) -> None:
    async with RawSite(soft_404) as site:
        r = await crawl(db, [f"{site.base}/x/"], obey_robots=False)
    assert site.targets == [b"/x/", b"/x/a/b/", b"/x/a/b/a/b/"]  # a/b three times: refused
    assert r.report.counters.skipped == {"repeated_segments": 1}


async def test_max_path_repeats_none_follows_them(db: Path) -> None:
    async with RawSite(soft_404) as site:
        seeds = [f"{site.base}/x/"]
        await crawl(db, seeds, obey_robots=False, max_path_repeats="none", max_depth=4)
    assert len(site.targets) == 5


async def test_a_link_with_too_many_query_parameters_is_not_followed(db: Path) -> None:
    twenty = "&".join(f"p{i}=1" for i in range(20))
    page = f'<a href="/q20?{twenty}">20</a> <a href="/q21?{twenty}&p20=1">21</a>'
    async with RawSite(lambda t: response(page) if t == b"/" else OK) as site:
        r = await crawl(db, [f"{site.base}/"], obey_robots=False)
    assert site.targets == [b"/", f"/q20?{twenty}".encode()]
    assert r.report.counters.skipped == {"too_many_query_params": 1}


# -- the per-host page budget --------------------------------------------------------------------


def twenty_pages(target: bytes) -> bytes:
    """``/`` and ``/p0`` … ``/p19``: each links to the twenty ``/pN``."""
    return response(" ".join(f'<a href="/p{i}">{i}</a>' for i in range(20)))


@pytest.mark.parametrize("frontier", ["embedded", "redis"])
async def test_max_pages_per_host_requests_at_most_that_many_pages(
    db: Path, frontier: str, request: pytest.FixtureRequest
) -> None:
    shared: dict[str, Any] = {}
    if frontier == "redis":
        shared = {"frontier": request.getfixturevalue("redis_url")}
        shared["job"] = request.getfixturevalue("job")
    async with RawSite(twenty_pages) as site:
        r = await crawl(db, [f"{site.base}/"], obey_robots=False, max_pages_per_host=5, **shared)
    assert site.targets == [b"/", b"/p0", b"/p1", b"/p2", b"/p3"]
    assert set(r.pages) == {site.base + t.decode() for t in site.targets}
    # 16 links over the budget; the worker pushes a link once while it remembers pushing it
    assert r.report.frontier.over_budget == 16


async def test_seed_and_inbox_entries_of_a_shared_job_get_the_jobs_url_rules(
    tmp_path: Path, redis_url: str, job: str
) -> None:
    """`crawlq seed` and the inbox build requests outside any page: the job's rules apply."""
    import redis.asyncio as aioredis

    from crawlq.engine.backends import assembled_worker, open_backends
    from crawlq.engine.seeding import seed
    from crawlq.frontier.redis import Keyspace
    from crawlq.request import CrawlRequest
    from crawlq.rules.scope import Scope
    from crawlq.settings import Settings

    cli = {"frontier": redis_url, "job": job, "store": str(tmp_path / "s.db"), "delay_s": 0}
    cli["host_concurrency"] = 10
    settings = Settings.build(cli={**cli, "strip_url_params": ["ref", "sid"]}, env={})
    seeded = await seed(settings, [CrawlRequest("http://a.test/p?ref=x&k=1;sid=2")])
    assert seeded.queued == 1
    client = aioredis.Redis.from_url(redis_url)
    try:  # a producer of its own, and an entry with a trap
        await client.lpush(Keyspace(job).inbox, "http://a.test/q?sid=9", "http://a.test/x/x/x")
    finally:
        await client.aclose()
    worker_settings = Settings.build(cli=cli, env={})  # no rules given: the job's are adopted
    async with open_backends(worker_settings) as backends:
        scope = Scope.from_settings(backends.settings, backends.settings.allowed_domains)
        assert scope.url_rules.strip_params == ("ref", "sid")
        async with assembled_worker(backends, Spider(), scope):  # gives the frontier its rules
            leases = await backends.frontier.lease(10, "w", 30)
            urls = sorted(lease.request.url for lease in leases)
            rejected = await backends.frontier.rejected()  # type: ignore[attr-defined]
    assert urls == ["http://a.test/p?k=1;sid=2", "http://a.test/q"]  # ";sid" is in a value
    assert [r["reason"] for r in rejected] == ["out_of_scope: repeated_segments"]
