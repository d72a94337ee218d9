"""crawlq.sitemap: the sitemaps.org formats, limits, safety, and the requests they lead to."""

from __future__ import annotations

import codecs
import gzip
import re
from collections import Counter

import pytest

from crawlq.errors import ConfigError
from crawlq.request import CrawlRequest
from crawlq.rules.scope import Scope
from crawlq.sitemap import (
    LASTMOD_KEY,
    MAX_NESTING,
    NESTING_KEY,
    SITEMAP_CALLBACK,
    SitemapKind,
    SitemapRules,
    is_sitemap,
    listed_priority,
    parse_sitemap,
    read_sitemap,
    robots_sitemaps,
    sitemap_request,
)
from crawlq.spider import Spider, is_callback

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(*entries: str, ns: str = NS) -> bytes:
    body = "".join(f"<url>{e}</url>" for e in entries)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{ns}">{body}</urlset>'.encode()


def index(*locs: str) -> bytes:
    body = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<sitemapindex xmlns="{NS}">{body}</sitemapindex>'.encode()


def locs(body: bytes, **limits: int) -> list[str]:
    return [e.loc for e in parse_sitemap(body, **limits).entries]


def test_urlset_whitespace_entities_cdata_and_bom() -> None:
    body = codecs.BOM_UTF8 + urlset(
        "<loc>\n   http://a.test/one  \n</loc>",
        "<loc>http://a.test/?x=1&amp;y=2</loc>",
        "<loc><![CDATA[http://a.test/?p=1&q=<2>]]></loc>",
        "<loc> <![CDATA[ http://a.test/mixed ]]> </loc>",
    )
    sitemap = parse_sitemap(body)
    assert sitemap.kind is SitemapKind.URLSET
    assert sitemap.error is None
    assert [e.loc for e in sitemap.entries] == [
        "http://a.test/one",
        "http://a.test/?x=1&y=2",
        "http://a.test/?p=1&q=<2>",
        "http://a.test/mixed",
    ]


def test_lastmod_and_priority_are_kept_and_priority_is_clamped() -> None:
    body = urlset(
        "<loc>http://a.test/1</loc><lastmod> 2024-05-01T10:00:00+00:00 </lastmod>"
        "<priority>0.8</priority><changefreq>daily</changefreq>",
        "<loc>http://a.test/2</loc><priority>7</priority>",
        "<loc>http://a.test/3</loc><priority>high</priority>",
        "<priority>0.9</priority>",  # no <loc>: invalid
    )
    sitemap = parse_sitemap(body)
    assert [(e.loc, e.lastmod, e.priority) for e in sitemap.entries] == [
        ("http://a.test/1", "2024-05-01T10:00:00+00:00", 0.8),
        ("http://a.test/2", None, 1.0),
        ("http://a.test/3", None, None),
    ]
    assert sitemap.invalid == 1


def test_namespace_is_not_required_and_extensions_are_ignored() -> None:
    body = (
        b'<urlset xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        b"<url><loc>http://a.test/p</loc><image:image><image:loc>http://a.test/i.png"
        b"</image:loc></image:image></url></urlset>"
    )
    assert locs(body) == ["http://a.test/p"]


def test_index() -> None:
    sitemap = parse_sitemap(index("http://a.test/s1.xml.gz", "http://a.test/s2.xml.gz"))
    assert sitemap.kind is SitemapKind.INDEX
    assert [e.loc for e in sitemap.entries] == [
        "http://a.test/s1.xml.gz",
        "http://a.test/s2.xml.gz",
    ]


def test_text_sitemap_with_bom_blank_lines_and_crlf() -> None:
    body = codecs.BOM_UTF8 + b"http://a.test/1\r\n\r\n  http://a.test/2  \nhttp://a.test/3"
    sitemap = parse_sitemap(body)
    assert sitemap.kind is SitemapKind.TEXT
    assert [e.loc for e in sitemap.entries] == [
        "http://a.test/1",
        "http://a.test/2",
        "http://a.test/3",
    ]


def test_gzip_by_content_and_several_members() -> None:
    body = gzip.compress(urlset("<loc>http://a.test/1</loc>"))
    assert locs(body) == ["http://a.test/1"]
    text = gzip.compress(b"http://a.test/1\nhttp://a.") + gzip.compress(b"test/2\n")
    assert locs(text) == ["http://a.test/1", "http://a.test/2"]


def test_broken_gzip_is_an_error_and_keeps_what_came_before() -> None:
    whole = gzip.compress(b"".join(b"http://a.test/%d\n" % n for n in range(5000)))
    sitemap = parse_sitemap(whole[: len(whole) // 2])
    assert sitemap.error == "sitemap_gzip_error: the gzip stream is cut short"
    assert 0 < len(sitemap.entries) < 5000
    error = parse_sitemap(b"\x1f\x8bnot gzip at all").error
    assert error is not None and error.startswith("sitemap_gzip_error:")


def test_too_many_urls_keeps_the_first_and_counts_the_rest() -> None:
    body = urlset(*(f"<loc>http://a.test/{n}</loc>" for n in range(25)))
    sitemap = parse_sitemap(body, max_urls=10)
    assert [e.loc for e in sitemap.entries] == [f"http://a.test/{n}" for n in range(10)]
    assert sitemap.found == 25
    assert sitemap.error == "sitemap_too_many_urls: 10 of 25"


def test_too_large_parses_the_first_bytes_only() -> None:
    body = urlset(*(f"<loc>http://a.test/{n:04}</loc>" for n in range(100)))
    cap = body.index(b"/0050")  # inside entry 50
    sitemap = parse_sitemap(body, max_bytes=cap)
    assert [e.loc for e in sitemap.entries] == [f"http://a.test/{n:04}" for n in range(50)]
    assert sitemap.error == f"sitemap_too_large: more than {cap} bytes"


def test_too_large_after_gunzip() -> None:
    plain = b"".join(b"http://a.test/%05d\n" % n for n in range(10_000))  # 200,000 bytes
    sitemap = parse_sitemap(gzip.compress(plain), max_bytes=100_000)
    assert len(sitemap.entries) == 100_000 // 20
    assert sitemap.error == "sitemap_too_large: more than 100000 bytes"


def test_bad_xml_keeps_the_urls_before_it() -> None:
    body = urlset(
        "<loc>http://a.test/1</loc>",
        "<loc>http://a.test/2?a=1&b=2</loc>",
        "<loc>http://a.test/3</loc>",
    )
    sitemap = parse_sitemap(body)
    assert [e.loc for e in sitemap.entries] == ["http://a.test/1"]
    assert sitemap.error is not None
    assert sitemap.error.startswith("sitemap_bad_xml: not well-formed (invalid token) at line 2")


def test_truncated_xml_is_bad_xml() -> None:
    body = urlset("<loc>http://a.test/1</loc>", "<loc>http://a.test/2</loc>")[:-20]
    sitemap = parse_sitemap(body)
    assert [e.loc for e in sitemap.entries] == ["http://a.test/1"]
    assert sitemap.error is not None and sitemap.error.startswith("sitemap_bad_xml:")


def test_billion_laughs_is_refused_before_any_expansion() -> None:
    lol = '<!ENTITY lol0 "lol">' + "".join(
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)
    )
    doc = "<urlset><url><loc>&lol9;</loc></url></urlset>"
    body = f'<?xml version="1.0"?><!DOCTYPE urlset [{lol}]>{doc}'
    sitemap = parse_sitemap(body.encode())
    assert sitemap.entries == []
    assert sitemap.error == "sitemap_bad_xml: DOCTYPE 'urlset' refused (DTDs are not read)"


def test_external_entity_is_refused() -> None:
    body = (
        b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        b"<urlset><url><loc>http://a.test/&xxe;</loc></url></urlset>"
    )
    sitemap = parse_sitemap(body)
    assert sitemap.entries == []
    assert sitemap.error is not None and "DOCTYPE" in sitemap.error


def test_undeclared_entity_is_bad_xml() -> None:
    sitemap = parse_sitemap(urlset("<loc>http://a.test/&nbsp;</loc>"))
    assert sitemap.entries == []
    assert sitemap.error is not None and "undefined entity" in sitemap.error


def test_html_and_other_roots_are_not_sitemaps() -> None:
    html = b"<!DOCTYPE html><html><body><a href='/x'>x</a></body></html>"
    assert parse_sitemap(html).error == "sitemap_unknown_format: an HTML document"
    assert parse_sitemap(b"<rss><channel/></rss>").error == (
        "sitemap_unknown_format: root element <rss>"
    )
    assert parse_sitemap(b"  \n").error == "sitemap_empty: no URLs"


def test_overlong_loc_is_invalid_not_cut() -> None:
    sitemap = parse_sitemap(urlset("<loc>http://a.test/" + "x" * 5000 + "</loc>"))
    assert sitemap.entries == []
    assert sitemap.invalid == 1


@pytest.mark.parametrize(
    ("p", "expected"),
    [(None, 0), (0.0, -5), (0.1, -4), (0.25, -2), (0.5, 0), (0.75, 3), (0.9, 4), (1.0, 5)],
)
def test_priority_mapping(p: float | None, expected: int) -> None:
    assert listed_priority(0, p) == expected
    assert listed_priority(-3, p) == expected - 3


def test_read_sitemap_makes_requests_with_depth_priority_and_lastmod() -> None:
    parent = sitemap_request("http://a.test/sitemap.xml", priority=2, depth=1)
    body = urlset(
        "<loc>http://a.test/top</loc><priority>1.0</priority><lastmod>2024-01-02</lastmod>",
        "<loc>http://a.test/plain</loc>",
        "<loc>http://other.test/x</loc>",
        "<loc>/relative</loc>",
    )
    listed = read_sitemap(parent, body, Scope(["a.test"]), SitemapRules())
    assert [(r.url, r.priority, r.depth, r.callback, dict(r.meta)) for r in listed.requests] == [
        ("http://a.test/top", 7, 1, None, {LASTMOD_KEY: "2024-01-02"}),
        ("http://a.test/plain", 2, 1, None, {}),
    ]
    assert listed.skipped == Counter({"offsite": 1, "invalid_url": 1})


def test_index_children_are_sitemaps_and_nesting_is_bounded() -> None:
    body = index("http://a.test/a.xml", "http://a.test/b.xml")
    parent = sitemap_request("http://a.test/index.xml", priority=4)
    listed = read_sitemap(parent, body, Scope(), SitemapRules())
    assert [r.url for r in listed.requests] == ["http://a.test/a.xml", "http://a.test/b.xml"]
    assert all(
        is_sitemap(r) and r.priority == 4 and r.meta[NESTING_KEY] == 1 for r in listed.requests
    )
    deep = sitemap_request("http://a.test/i.xml", meta={NESTING_KEY: MAX_NESTING})
    listed = read_sitemap(deep, body, Scope(), SitemapRules())
    assert listed.requests == []
    assert listed.skipped == Counter({"sitemap_nesting": 2})


class _Shop(Spider):
    sitemap_rules = [("/product/", "parse_product"), ("/blog/", "parse")]
    sitemap_follow = [r"/sitemap-products"]

    def parse_product(self, response: object) -> None:
        return None


def _rules(spider: Spider) -> SitemapRules:
    return SitemapRules.compile(
        spider.sitemap_rules, spider.sitemap_follow, lambda name: is_callback(spider, name)
    )


def test_rules_choose_callbacks_and_follow_chooses_children() -> None:
    rules = _rules(_Shop())
    body = urlset(
        "<loc>http://a.test/product/1</loc>",
        "<loc>http://a.test/blog/2</loc>",
        "<loc>http://a.test/about</loc>",
    )
    listed = read_sitemap(sitemap_request("http://a.test/s.xml"), body, Scope(), rules)
    assert [(r.url, r.callback) for r in listed.requests] == [
        ("http://a.test/product/1", "parse_product"),
        ("http://a.test/blog/2", "parse"),
    ]
    assert listed.skipped == Counter({"sitemap_rules": 1})
    children = index("http://a.test/sitemap-products-1.xml", "http://a.test/sitemap-news.xml")
    listed = read_sitemap(sitemap_request("http://a.test/i.xml"), children, Scope(), rules)
    assert [r.url for r in listed.requests] == ["http://a.test/sitemap-products-1.xml"]
    assert listed.skipped == Counter({"sitemap_follow": 1})


def test_rules_refuse_bad_regexes_and_callbacks() -> None:
    spider = _Shop()
    check = lambda name: is_callback(spider, name)  # noqa: E731
    with pytest.raises(ConfigError, match="not a public method"):
        SitemapRules.compile([("x", "_private")], (), check)
    with pytest.raises(ConfigError, match="not a public method"):
        SitemapRules.compile([("x", "start_requests")], (), check)
    with pytest.raises(ConfigError, match="not a public method"):
        SitemapRules.compile([("x", "missing")], (), check)
    with pytest.raises(ConfigError, match="bad regex"):
        SitemapRules.compile([("(", "parse")], (), check)
    with pytest.raises(ConfigError, match="bad regex"):
        SitemapRules.compile((), ["["], check)
    with pytest.raises(ConfigError, match="not \\(regex, callback\\)"):
        SitemapRules.compile(["parse"], (), check)  # type: ignore[list-item]
    compiled = SitemapRules.compile([(re.compile("p"), _Shop.parse_product)], (), check)
    assert compiled.callback_for("http://a.test/p") == (True, "parse_product")


def test_robots_sitemaps_pass_follow_and_scope() -> None:
    trigger = CrawlRequest("http://a.test/page", priority=-2, depth=3)
    rules = SitemapRules.compile((), [r"\.xml"])
    requests, skipped = robots_sitemaps(
        ["http://a.test/s.xml", "http://a.test/s.txt", "http://b.test/s.xml", "ftp://a.test/x.xml"],
        trigger,
        Scope(["a.test"]),
        rules,
    )
    assert [(r.url, r.callback, r.priority, r.depth) for r in requests] == [
        ("http://a.test/s.xml", SITEMAP_CALLBACK, -2, 3)
    ]
    assert skipped == Counter({"sitemap_follow": 1, "offsite": 1, "invalid_url": 1})


def test_spider_start_requests_include_its_sitemaps() -> None:
    spider = Spider(start_urls=["http://a.test/"], sitemap_urls=["http://a.test/sitemap.xml"])
    requests = list(spider.start_requests())
    assert [(r.url, r.callback) for r in requests] == [
        ("http://a.test/", None),
        ("http://a.test/sitemap.xml", SITEMAP_CALLBACK),
    ]
    assert not is_callback(spider, SITEMAP_CALLBACK)


def test_entries_past_the_limit_are_counted_across_chunks_without_extensions() -> None:
    image = "<image:image><image:loc>http://a.test/i.png</image:loc></image:image>"
    entries = "".join(f"<url><loc>http://a.test/{n}</loc>{image}</url>" for n in range(40_000))
    body = (
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        f"{entries}<!-- the end --></urlset>"
    ).encode()
    assert len(body) > 3 * 2**20  # several chunks
    sitemap = parse_sitemap(body, max_urls=100)
    assert [e.loc for e in sitemap.entries] == [f"http://a.test/{n}" for n in range(100)]
    assert sitemap.error == "sitemap_too_many_urls: 100 of 40000"
    prefixed = "".join(
        f"<sm:url><sm:loc>http://a.test/{n}</sm:loc></sm:url>" for n in range(50_000)
    )
    body = f'<sm:urlset xmlns:sm="{NS}">{prefixed}</sm:urlset>'.encode()
    sitemap = parse_sitemap(body, max_urls=10)
    assert len(sitemap.entries) == 10
    assert sitemap.found == 50_000


def test_text_lines_past_the_limit_are_counted() -> None:
    body = b"".join(b"http://a.test/%d\n\n" % n for n in range(300_000)) + b"http://a.test/last"
    sitemap = parse_sitemap(body, max_urls=7)
    assert [e.loc for e in sitemap.entries] == [f"http://a.test/{n}" for n in range(7)]
    assert sitemap.error == "sitemap_too_many_urls: 7 of 300001"


def test_head_spanning_many_blank_chunks() -> None:
    body = b"\n" * (3 * 2**20 + 5) + urlset("<loc>http://a.test/x</loc>")
    assert locs(body) == ["http://a.test/x"]
    assert locs(gzip.compress(body)) == ["http://a.test/x"]


def test_follow_sitemaps_needs_obey_robots() -> None:
    from crawlq.settings import Settings

    with pytest.raises(ConfigError, match="follow_sitemaps"):
        Settings.build(cli={"follow_sitemaps": True, "obey_robots": False}, env={})
    assert Settings.build(cli={"follow_sitemaps": True}, env={}).follow_sitemaps
