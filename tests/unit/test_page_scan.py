"""What a page says about itself (`crawlq.links.scan_page`, `parse_refresh`), the settings
that shape it, and what a spider's `Response` offers to follow."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlq.errors import ConfigError
from crawlq.links import (
    IGNORED_EXTENSIONS,
    LinkRules,
    Refresh,
    extract_links,
    parse_html,
    parse_refresh,
    scan_page,
)
from crawlq.request import CrawlRequest, FetchResult
from crawlq.settings import DEFAULT_SKIP_EXTENSIONS, Settings
from crawlq.spider import Response

PAGE = "http://example.com/docs/guide/intro.html"


# -- parse_refresh: the HTML Standard's shared declarative refresh steps 2-11.10 -------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0", (0, None)),
        ("5", (5, None)),
        ("  5  ", (5, None)),
        ("\t\n\f\r 7", (7, None)),
        ("1.5", (1, None)),  # step 8: the fraction is ignored
        (".5; url=x", (0, "x")),  # step 6: only a fraction is a delay of 0
        (".", (0, None)),
        ("5;", (5, None)),
        ("5 ;  ", (5, None)),
        ("5,url=x", (5, "x")),
        ("5 url=x", (5, "x")),
        ("0\turl=x", (0, "x")),
        ("0;\n  URL = 'next.html'", (0, "next.html")),  # newlines are ASCII whitespace
        ("0;\nurl=\n/next", (0, "/next")),
        ("0; url='a b' trailing", (0, "a b")),  # 11.10: up to the matching quote
        ('0; URL="x.html', (0, "x.html")),  # no closing quote: the rest
        ('0; url="x\'y"', (0, "x'y")),
        ("0; x.html", (0, "x.html")),  # no "url=": the rest is the URL
        ("0; 'x.html'", (0, "x.html")),  # 11.2 jumps to "skip quotes"
        ("0; urx.html", (0, "urx.html")),  # 11.3 jumps to "parse" with the whole rest
        ("0; url x.html", (0, "url x.html")),  # 11.6 likewise: no "="
        ("0; u", (0, "u")),
        ("0; url=", (0, "")),
        ("0;; url=x", (0, "; url=x")),
        ("3; url = https://e.com/?a=1;b=2", (3, "https://e.com/?a=1;b=2")),
    ],
)
def test_parse_refresh(content: str, expected: tuple[int, str | None]) -> None:
    assert parse_refresh(content) == expected


@pytest.mark.parametrize("content", ["", "   ", "soon", "5x", "5x; url=a", "-1", "\u00a05", "+5"])
def test_parse_refresh_gives_up_as_the_standard_does(content: str) -> None:
    assert parse_refresh(content) is None


def test_parse_refresh_of_a_huge_delay_does_not_raise() -> None:
    parsed = parse_refresh("9" * 5000 + "; url=x")
    assert parsed is not None and parsed[0] >= 10**12 and parsed[1] == "x"


# -- scan_page --------------------------------------------------------------------------------


def scan(html: str, url: str = PAGE):
    return scan_page(parse_html(html), url)


def test_a_refresh_resolves_against_base_href_and_drops_the_fragment() -> None:
    s = scan('<meta http-equiv="REFRESH" content="2;\n url=../next.html#part"><base href="a/b/">')
    assert s.base == "http://example.com/docs/guide/a/b/"
    assert s.refresh == Refresh(2, "http://example.com/docs/guide/a/next.html")


def test_a_refresh_to_the_page_itself_has_no_url() -> None:
    assert scan('<meta http-equiv="refresh" content="30">').refresh == Refresh(30, None)
    same = '<meta http-equiv="refresh" content="0; url=intro.html#top">'
    assert scan(same).refresh == Refresh(0, None)
    # an empty url= names the document base, which <base href> may move elsewhere
    assert scan('<meta http-equiv="refresh" content="0; url=">').refresh == Refresh(0, None)
    moved = scan('<base href="/other/"><meta http-equiv="refresh" content="0; url=">')
    assert moved.refresh == Refresh(0, "http://example.com/other/")


def test_the_first_refresh_that_parses_to_an_http_url_wins() -> None:
    html = (
        '<meta http-equiv="refresh" content="soon">'  # not a refresh: the next one counts
        '<meta http-equiv="refresh" content="0; url=javascript:alert(1)">'
        '<meta http-equiv="refresh" content="1; url=/first">'
        '<meta http-equiv="refresh" content="0; url=/second">'
    )
    assert scan(html).refresh == Refresh(1, "http://example.com/first")


def test_a_refresh_in_the_body_counts_and_other_metas_do_not() -> None:
    html = (
        '<meta name="refresh" content="0; url=/no"><meta http-equiv="content-type" '
        'content="text/html"><body><p>x</p><meta http-equiv=" Refresh " content="0;/late">'
    )
    assert scan(html).refresh == Refresh(0, "http://example.com/late")
    assert scan("<p>no refresh</p>").refresh is None


def test_the_canonical_url_is_the_first_valid_one_resolved_and_normalised() -> None:
    html = (
        '<base href="/base/"><link rel="alternate" href="/alt">'
        '<link rel="canonical" href="mailto:x@example.com">'
        '<link rel="Canonical  shortlink" href=" Page?b=2&a=1#frag ">'
        '<link rel="canonical" href="/second">'
    )
    assert scan(html).canonical_url == "http://example.com/base/Page?b=2&a=1"
    assert scan('<link rel="canonical">').canonical_url is None
    assert scan('<link rel="canonical" href="">').canonical_url is None
    assert scan('<link rel="canonical" href="http://">').canonical_url is None


def test_meta_robots_directives() -> None:
    s = scan(
        '<meta name="Robots" content="NOINDEX , NoFollow"><meta name="robots" content="noarchive">'
        '<meta name="googlebot" content="noimageindex">'
    )
    assert s.robots == {"noindex", "nofollow", "noarchive"}
    assert s.robots_nofollow
    assert scan('<meta name="robots" content="none">').robots_nofollow
    assert not scan('<meta name="robots" content="index, follow">').robots_nofollow
    assert not scan("<p>x</p>").robots_nofollow


def test_links_tell_nofollow_apart() -> None:
    html = (
        '<a href="a" rel="nofollow">a</a><a href="b" rel="external NOFOLLOW">b</a>'
        '<a href="c" rel="nofollow">c1</a><a href="c#x">c2</a>'  # also linked without it
        '<a href="d">d1</a><a href="./d" rel="nofollow">d2</a>'
        '<a href="e" rel="nofollowing">e</a>'
    )
    links = scan(html).links()
    base = "http://example.com/docs/guide/"
    assert links.urls == tuple(base + x for x in "abcde")
    assert links.nofollow == {base + "a", base + "b"}


def test_links_count_the_extensions_they_skip() -> None:
    html = '<a href="x.pdf">1</a><a href="x.pdf#p">2</a><a href="y.PNG?v=1">3</a><a href="z.html">'
    links = scan(html).links()
    assert links.urls == ("http://example.com/docs/guide/z.html",)
    assert links.skipped_extension == (  # distinct links, normalised, in document order
        "http://example.com/docs/guide/x.pdf",
        "http://example.com/docs/guide/y.PNG?v=1",
    )
    assert scan(html).links(frozenset()).urls == (
        "http://example.com/docs/guide/x.pdf",
        "http://example.com/docs/guide/y.PNG?v=1",
        "http://example.com/docs/guide/z.html",
    )
    assert len(scan(html).links(frozenset({"png"})).skipped_extension) == 1
    assert extract_links(parse_html(html), PAGE, skip_extensions=frozenset({"pdf"})) == [
        "http://example.com/docs/guide/y.PNG?v=1",
        "http://example.com/docs/guide/z.html",
    ]


# -- settings ---------------------------------------------------------------------------------


def test_the_defaults() -> None:
    s = Settings.build(env={})
    assert (s.meta_refresh, s.meta_refresh_max_delay_s) == (True, 100.0)
    assert s.skip_extensions == DEFAULT_SKIP_EXTENSIONS
    assert frozenset(DEFAULT_SKIP_EXTENSIONS) == IGNORED_EXTENSIONS
    assert LinkRules.from_settings(s) == LinkRules(IGNORED_EXTENSIONS, True)
    off = Settings.build(env={}, cli={"obey_robots": False, "skip_extensions": ()})
    assert LinkRules.from_settings(off) == LinkRules(frozenset(), False)


def test_skip_extensions_from_every_source(tmp_path: Path) -> None:
    conf = tmp_path / "crawl.toml"
    conf.write_text('skip_extensions = [".PDF", "zip", "pdf"]\n')
    assert Settings.build(file=conf, env={}).skip_extensions == ("pdf", "zip")
    env = {"CRAWLQ_SKIP_EXTENSIONS": "gz, Tgz"}
    assert Settings.build(env=env).skip_extensions == ("gz", "tgz")
    assert Settings.build(env={"CRAWLQ_SKIP_EXTENSIONS": ""}).skip_extensions == ()
    conf.write_text("skip_extensions = []\nmeta_refresh = false\nmeta_refresh_max_delay_s = 0\n")
    s = Settings.build(file=conf, env={})
    assert (s.skip_extensions, s.meta_refresh, s.meta_refresh_max_delay_s) == ((), False, 0.0)


@pytest.mark.parametrize(
    ("cli", "name"),
    [
        ({"skip_extensions": ("tar.gz",)}, "skip_extensions"),
        ({"skip_extensions": ("pdf", " ")}, "skip_extensions"),
        ({"skip_extensions": ("a/b",)}, "skip_extensions"),
        ({"meta_refresh_max_delay_s": -1}, "meta_refresh_max_delay_s"),
        ({"meta_refresh": "maybe"}, "meta_refresh"),
    ],
)
def test_bad_values_name_the_setting(cli: dict[str, object], name: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build(env={}, cli=cli)
    assert info.value.name == name


# -- Response ---------------------------------------------------------------------------------

NOFOLLOW_PAGE = (
    '<link rel="canonical" href="/canonical"><a href="a.html">a</a>'
    '<a href="b.html" rel="nofollow">b</a><a href="c.pdf">c</a>'
)


def response(body: str, rules: LinkRules | None = None) -> Response:
    req = CrawlRequest(url=PAGE)
    result = FetchResult(
        url=PAGE,
        final_url=PAGE,
        status=200,
        headers={"content-type": "text/html"},
        body=body.encode(),
        encoding="utf-8",
        text=body,
        elapsed_s=0.01,
    )
    return Response(req, result, rules=rules)


def test_follow_all_leaves_out_nofollow_links_and_counts_them() -> None:
    resp = response(NOFOLLOW_PAGE)
    base = "http://example.com/docs/guide/"
    assert resp.links() == [base + "a.html", base + "b.html"]
    assert resp.skipped_links == {"extension": 1}
    assert [r.url for r in resp.follow_all()] == [base + "a.html"]
    assert [r.url for r in resp.follow_all()] == [base + "a.html"]  # counted once
    assert resp.skipped_links == {"extension": 1, "nofollow": 1}
    assert resp.links(include_nofollow=False) == [base + "a.html"]
    assert resp.canonical_url == "http://example.com/canonical"
    assert resp.meta_robots == frozenset()


def test_meta_robots_nofollow_leaves_out_every_link() -> None:
    resp = response('<meta name="robots" content="noindex,nofollow">' + NOFOLLOW_PAGE)
    assert resp.follow_all() == []
    assert resp.skipped_links == {"extension": 1, "nofollow": 2}
    assert len(resp.follow_all(resp.links())) == 2  # a spider may follow them anyway


def test_follow_all_takes_nofollow_links_when_robots_rules_are_off() -> None:
    resp = response(NOFOLLOW_PAGE, LinkRules(frozenset(), honour_nofollow=False))
    base = "http://example.com/docs/guide/"
    assert [r.url for r in resp.follow_all()] == [base + "a.html", base + "b.html", base + "c.pdf"]
    assert resp.skipped_links == {}


def test_the_readme_lists_the_default_skipped_extensions() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("The default list") : readme.index("replaces the list")]
    listed: set[str] = set()
    for line in section.splitlines():
        if line.startswith("- "):  # "- kind: ext ext …"
            listed.update(line.partition(":")[2].split())
        elif line.startswith("  "):  # its continuation
            listed.update(line.split())
    assert listed == set(DEFAULT_SKIP_EXTENSIONS)


def test_overlong_refresh_and_canonical_urls_are_ignored() -> None:
    def page(path: str) -> str:
        return (
            f'<meta http-equiv="refresh" content="0; url={path}"><link rel=canonical href={path}>'
        )

    s = scan(page("/" + "x" * 2000))
    assert s.refresh is not None and s.refresh.url == s.canonical_url
    s = scan(page("/" + "x" * 3000))  # longer than crawlq.rules.scope.MAX_URL_LENGTH
    assert (s.refresh, s.canonical_url) == (None, None)
