"""URL rules as browsers apply them (crawlq.urls, crawlq.rules.scope): pure functions, no I/O."""

from __future__ import annotations

import random

import pytest

from crawlq.errors import ConfigError, InvalidURL
from crawlq.fetch.exchange import joined_headers as _joined_headers
from crawlq.links import extract_links, parse_html
from crawlq.request import CrawlRequest
from crawlq.rules.retry import parse_retry_after
from crawlq.rules.scope import FilterReason, Scope, repeats_segments
from crawlq.settings import Settings
from crawlq.urls import UrlRules, decode_location, encode_query, normalize, resolve

BASE = "http://h.test/dir/page.html"


@pytest.mark.parametrize(
    ("ref", "base", "expected"),
    [
        ("///other.test/p", BASE, "http://other.test/p"),
        ("////other.test/p", "https://h.test/", "https://other.test/p"),
        ("\\\\other.test\\a\\b?x\\y", BASE, "http://other.test/a/b?x\\y"),  # not in the query
        ("/\\other.test/p", BASE, "http://other.test/p"),
        ("http:other.test/p", BASE, "http://h.test/dir/other.test/p"),  # same scheme: relative
        ("http:other.test/p", "https://h.test/", "http://other.test/p"),  # another: a host
        ("https:/other.test/p", BASE, "https://other.test/p"),
        ("  \t/a\nb c ", BASE, "http://h.test/ab%20c"),
        ("%2e%2e/x", BASE, "http://h.test/x"),
        ("a//b/../c", BASE, "http://h.test/dir/a//c"),  # empty segments are kept
        ("//0x7f.1/", BASE, "http://127.0.0.1/"),
    ],
)
def test_resolve_follows_the_whatwg_url_standard(ref: str, base: str, expected: str) -> None:
    assert resolve(ref, base) == expected


@pytest.mark.parametrize("ref", ["http://", "http://[::1/x", "http://h:99999/", "/caf\udce9"])
def test_resolve_refuses_what_browsers_refuse(ref: str) -> None:
    with pytest.raises(InvalidURL):
        resolve(ref, BASE)


def test_normalize_with_a_base_resolves_as_browsers_do() -> None:
    assert normalize("///other.test/p#f", BASE) == "http://other.test/p"
    assert normalize("..\\up.html", BASE) == "http://h.test/up.html"


@pytest.mark.parametrize(
    ("url", "encoding", "expected"),
    [
        ("/s?q=crème", "cp1252", "/s?q=cr%E8me"),
        ("/café/?q=crème#frag", "cp1252", "/café/?q=cr%E8me#frag"),  # the path: UTF-8 later
        ("?q=\u4e2d", "cp1252", "?q=%26%2320013%3B"),  # not in windows-1252
        ("?q=ж", "koi8-r", "?q=%D6"),
        ("?q=é", "utf-8", "?q=é"),
        ("?q=é", "utf-16-le", "?q=é"),  # WHATWG: UTF-16 pages encode URLs as UTF-8
        ("?q=é", "no-such-codec", "?q=é"),
        ("?q=é", None, "?q=é"),
        ("/a?q=1#é", "cp1252", "/a?q=1#é"),
    ],
)
def test_encode_query_uses_the_page_encoding(url: str, encoding: str | None, expected: str) -> None:
    assert encode_query(url, encoding) == expected


def test_encode_query_returns_ascii_urls_themselves() -> None:
    url = "http://h.test/p?q=plain"
    assert encode_query(url, "cp1252") is url


@pytest.mark.parametrize(
    ("raw", "text"),
    [  # web-platform-tests fetch/api/redirect/redirect-location-escape.tentative.any.js
        (b"top.txt?%E2%98%83%e2%98%83", "top.txt?%E2%98%83%e2%98%83"),
        (b"top.txt?\xe2\x98\x83", "top.txt?%E2%98%83"),
        (b"top.txt?\xe2\x98\x83%e2%98%83", "top.txt?%E2%98%83%e2%98%83"),
        (b"top.txt?%\xe2\x98\x83", "top.txt?%%E2%98%83"),
        (b"top.txt?\xff", "top.txt?%FF"),
        (b"/caf\xe9", "/caf%E9"),  # latin-1
    ],
)
def test_decode_location_keeps_bytes_as_bytes(raw: bytes, text: str) -> None:
    assert decode_location(raw) == text


STRIP = UrlRules(("jsessionid", "phpsessid", "sid", "sessionid", "utm_*"))


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h.test/a;jsessionid=1F3A/b.html", "http://h.test/a/b.html"),
        ("http://h.test/b.html;JSESSIONID=9?x=1", "http://h.test/b.html?x=1"),
        ("http://h.test/p;a=1;jsessionid=2;b=3", "http://h.test/p;a=1;b=3"),
        ("http://h.test/p?PHPSESSID=abc&x=1&sid=2", "http://h.test/p?x=1"),
        ("http://h.test/p?utm_source=a&UTM_Medium=b&utm_=c&k", "http://h.test/p?k"),
        ("http://h.test/p?sid", "http://h.test/p"),
        ("http://h.test/p?sidebar=1&side=2&sessionids=3", None),  # whole names only
        ("http://h.test/p?x=sid=1&y=;jsessionid=2", None),  # values are not names
        ("http://h.test/sid/utm_x", None),  # path segments are not parameters
        ("http://h.test/p?utm%5Fsource=1", None),  # a name as written
    ],
)
def test_url_rules_strip_session_and_tracking_parameters(url: str, expected: str | None) -> None:
    stripped = STRIP.apply(url)
    if expected is None:
        assert stripped is url
    else:
        assert stripped == expected


def test_url_rules_take_globs_and_an_empty_list_strips_nothing() -> None:
    rules = UrlRules(["ref?", "*id", " "])
    assert rules.apply("http://h.test/?ref1=a&refs=b&ref=c&gclid=d&fbclid=e&id=f&k=1") == (
        "http://h.test/?ref=c&k=1"
    )
    url = "http://h.test/p;jsessionid=1?sid=2&utm_source=3"
    assert UrlRules(()).apply(url) is url


def test_a_rewritten_request_has_its_own_fingerprint_and_keeps_the_rest() -> None:
    request = CrawlRequest("http://h.test/p?sid=1&x=2", priority=5, depth=2, meta={"k": 1})
    stripped = request.rewritten(STRIP)
    assert stripped.url == "http://h.test/p?x=2"
    assert stripped.fingerprint == CrawlRequest("http://h.test/p?x=2").fingerprint
    assert (stripped.priority, stripped.depth, stripped.meta) == (5, 2, {"k": 1})
    plain = CrawlRequest("http://h.test/p?x=2")
    assert plain.rewritten(STRIP) is plain


@pytest.mark.parametrize(
    ("path", "repeats"),
    [
        ("/a/b/a/b/a/b/", True),
        ("/q/a/b/c/a/b/c/a/b/c/z", True),
        ("/x/x/x", True),
        ("/x//x/x", True),  # empty segments ignored
        ("/a/b/a/b/c", False),
        ("/x/x", False),
        ("/2026/12/01/12/01/", False),
        ("/a/b/c/d/e/f/g", False),
        ("/?a/a/a/a", False),  # the query is not the path
        ("", False),
    ],
)
def test_repeated_segments(path: str, repeats: bool) -> None:
    assert repeats_segments(f"http://h.test{path}", 2) is repeats


def test_scope_admit_rewrites_then_checks_traps() -> None:
    scope = Scope.from_settings(Settings(), ())
    twenty = "&".join(f"p{i}=1" for i in range(20))
    request, reason = scope.admit(CrawlRequest(f"http://h.test/?{twenty}&sid=9"))
    assert (request.url, reason) == (f"http://h.test/?{twenty}", None)
    _, reason = scope.admit(CrawlRequest(f"http://h.test/?{twenty}&x=1"))
    assert reason is FilterReason.TOO_MANY_QUERY_PARAMS
    _, reason = scope.admit(CrawlRequest("http://h.test/a/b/a/b/a/b/"))
    assert reason is FilterReason.REPEATED_SEGMENTS
    off = Settings(max_query_params=None, max_path_repeats=None, strip_url_params=())
    loose = Scope.from_settings(off, ())
    request, reason = loose.admit(CrawlRequest(f"http://h.test/a/a/a/?{twenty}&sid=9&x=1"))
    assert reason is None and request.url.endswith("&sid=9&x=1")


def test_trap_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="strip_url_params"):
        Settings(strip_url_params=("a=b",))
    for name in ("max_path_repeats", "max_pages_per_host"):
        with pytest.raises(ConfigError, match=name):
            Settings(**{name: 0})  # type: ignore[arg-type]
    assert Settings.build(env={"CRAWLQ_STRIP_URL_PARAMS": ""}).strip_url_params == ()
    assert Settings.build(env={"CRAWLQ_STRIP_URL_PARAMS": "sid, ref*"}).strip_url_params == (
        "sid",
        "ref*",
    )
    assert Settings.build(env={"CRAWLQ_MAX_QUERY_PARAMS": "none"}).max_query_params is None


def test_links_of_a_windows_1252_page_encode_their_queries_in_it() -> None:
    tree = parse_html('<a href="?q=crème">1</a><a href="caf\u00e9?q=é">2</a><a href="x?y=1">3</a>')
    assert extract_links(tree, "http://h.test/d/p", encoding="cp1252") == [
        "http://h.test/d/p?q=cr%E8me",
        "http://h.test/d/caf%C3%A9?q=%E9",
        "http://h.test/d/x?y=1",
    ]
    assert extract_links(tree, "http://h.test/d/p")[:2] == [
        "http://h.test/d/p?q=cr%C3%A8me",
        "http://h.test/d/caf%C3%A9?q=%C3%A9",
    ]


def test_random_hrefs_resolve_as_the_url_standard_says() -> None:
    """The concatenating fast paths of link extraction agree with the WHATWG parser."""
    rng = random.Random(13)
    parts = ["a", "b.html", ".", "..", "", "x?y=1", "?q", "%41", "%2e", ";p", "~u", "c\\d", "é"]
    bases = [BASE, "https://h.test:8443/a/b/?q=1", "http://h.test", "http://h.test/d//e"]
    for _ in range(3000):
        href = "/".join(rng.choice(parts) for _ in range(rng.randint(1, 5)))
        if rng.random() < 0.3:
            href = "/" + href
        if not href.strip() or href.startswith("//"):
            continue
        base = rng.choice(bases)
        try:
            expected = [normalize(resolve(href, base))]
        except InvalidURL:
            expected = []
        got = extract_links(parse_html(f'<a href="{href}">x</a>'), base)
        assert got == expected, (base, href)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("120", 120.0), ("²", None), ("٣", None), ("9" * 5000, 2.0**31), ("soon", None)],
)
def test_retry_after_never_raises(value: str, seconds: float | None) -> None:
    assert parse_retry_after(value, 0.0) == seconds


def test_header_values_never_hold_lone_surrogates() -> None:
    headers = _joined_headers(
        [
            (b"Content-Type", b"text/html; charset=\xe9"),
            (b"X-A", "caf\u00e9".encode()),
            (b"x-a", b"\xff"),
        ]
    )
    assert headers == {"content-type": "text/html; charset=\xe9", "x-a": "caf\u00e9, \xff"}
    for value in headers.values():
        value.encode("utf-8")  # would raise on a surrogate
