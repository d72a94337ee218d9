from __future__ import annotations

import random
from urllib.parse import urldefrag, urljoin

import pytest

from crawlq.errors import InvalidURL
from crawlq.links import (
    IGNORED_EXTENSIONS,
    document_base,
    extract_links,
    extract_title,
    parse_html,
)
from crawlq.urls import normalize

PAGE = "http://example.com/docs/guide/intro.html"


def links(body: str, base_url: str = PAGE) -> list[str]:
    return extract_links(parse_html(body), base_url)


def anchors(*hrefs: str) -> str:
    return "".join(f'<a href="{h}">x</a>' for h in hrefs)


def test_relative_links_resolve_against_page_url() -> None:
    html = anchors("next.html", "sub/page.html?x=1", "../index.html", "./same.html", "/root")
    assert links(html) == [
        "http://example.com/docs/guide/next.html",
        "http://example.com/docs/guide/sub/page.html?x=1",
        "http://example.com/docs/index.html",
        "http://example.com/docs/guide/same.html",
        "http://example.com/root",
    ]


def test_query_only_and_dot_segment_hrefs() -> None:
    assert links(anchors("?page=2", "a/../b.html", "..", ".")) == [
        "http://example.com/docs/guide/intro.html?page=2",
        "http://example.com/docs/guide/b.html",
        "http://example.com/docs/",
        "http://example.com/docs/guide/",
    ]


def test_absolute_and_protocol_relative_links() -> None:
    html = anchors("https://other.org/a", "//cdn.example.net/page", "HTTP://Upper.COM/Path")
    assert links(html) == [
        "https://other.org/a",
        "http://cdn.example.net/page",
        normalize("HTTP://Upper.COM/Path"),
    ]
    assert links(anchors("//cdn.example.net/x"), "https://example.com/") == [
        "https://cdn.example.net/x"
    ]


def test_base_href_is_honoured_and_resolved_against_page_url() -> None:
    html = (
        '<html><head><base href="/other/dir/"></head><body>'
        + anchors("a.html", "/b")
        + "</body></html>"
    )
    assert links(html) == ["http://example.com/other/dir/a.html", "http://example.com/b"]


def test_only_the_first_base_href_counts_even_after_links() -> None:
    html = anchors("a.html") + '<base href="http://first.test/x/"><base href="http://second.test/">'
    assert links(html) == ["http://first.test/x/a.html"]


def test_base_without_href_and_non_http_base_are_ignored() -> None:
    assert links('<base target="_blank">' + anchors("a.html")) == [
        "http://example.com/docs/guide/a.html"
    ]
    assert links('<base href="javascript:void(0)">' + anchors("a.html")) == [
        "http://example.com/docs/guide/a.html"
    ]
    assert links('<base href="  ">' + anchors("a.html")) == ["http://example.com/docs/guide/a.html"]


def test_document_base() -> None:
    tree = parse_html('<base href="sub/">')
    assert document_base(tree, PAGE) == "http://example.com/docs/guide/sub/"
    assert document_base(parse_html("<p>no base</p>"), PAGE) == PAGE


def test_area_links_are_extracted_in_document_order() -> None:
    html = '<a href="1.html"></a><map><area href="2.html"></map><a href="3.html"></a>'
    assert [u.rsplit("/", 1)[1] for u in links(html)] == ["1.html", "2.html", "3.html"]


def test_other_elements_are_not_links() -> None:
    html = '<link href="style.html"><img src="i.html"><script src="s.html"></script><a>no href</a>'
    assert links(html) == []


@pytest.mark.parametrize(
    "href",
    [
        "javascript:void(0)",
        "JavaScript:alert(1)",
        " javascript:x",
        "mailto:someone@example.com",
        "tel:+15551234",
        "data:text/html,<p>x</p>",
        "ftp://ftp.example.com/file",
        "irc://irc.libera.chat/postgresql",
        "news:comp.lang.python",
        "file:///etc/passwd",
    ],
)
def test_non_http_schemes_are_skipped(href: str) -> None:
    assert links(anchors(href)) == []


@pytest.mark.parametrize("href", ["", "   ", "#", "#top", "  #section-2  "])
def test_empty_and_fragment_only_hrefs_are_skipped(href: str) -> None:
    assert links(anchors(href) + "<a href>empty attribute</a>") == []


def test_fragments_are_dropped_and_duplicates_removed_in_first_seen_order() -> None:
    html = anchors(
        "b.html#one", "a.html", "b.html#two", "b.html", "http://example.com/docs/guide/a.html#x"
    )
    assert links(html) == [
        "http://example.com/docs/guide/b.html",
        "http://example.com/docs/guide/a.html",
    ]


def test_whitespace_around_href_is_stripped() -> None:
    assert links(anchors("\n  page.html \t")) == ["http://example.com/docs/guide/page.html"]


def test_urls_are_normalised() -> None:
    assert links(anchors("a b.html", "caf\u00e9.html")) == [
        "http://example.com/docs/guide/a%20b.html",
        "http://example.com/docs/guide/caf%C3%A9.html",
    ]


@pytest.mark.parametrize(
    "href",
    [
        "logo.png",
        "photo.JPG",
        "/static/app.js",
        "style.css?v=3",
        "font.woff2",
        "archive.tar.gz",
        "report.pdf",
        "slides.pptx",
        "song.mp3",
        "movie.mp4",
        "diagram.svg",
        "setup.exe",
    ],
)
def test_asset_extensions_are_skipped(href: str) -> None:
    assert links(anchors(href)) == []


def test_extension_check_looks_at_the_path_only() -> None:
    html = anchors(
        "download?file=report.pdf",  # extension in the query
        "http://files.zip/",  # "extension" in the host
        "http://example.pdf",
        "dir.png/page.html",  # extension on a directory
        "page.html",
        "noext",
    )
    assert links(html) == [
        "http://example.com/docs/guide/download?file=report.pdf",
        "http://files.zip/",
        "http://example.pdf",
        "http://example.com/docs/guide/dir.png/page.html",
        "http://example.com/docs/guide/page.html",
        "http://example.com/docs/guide/noext",
    ]


def test_ignored_extensions_are_lower_case_without_dots() -> None:
    assert {"pdf", "png", "css", "js", "zip", "docx", "mp4", "woff2"} <= IGNORED_EXTENSIONS
    assert all(ext == ext.lower() and not ext.startswith(".") for ext in IGNORED_EXTENSIONS)
    assert not {"html", "htm", "php", "asp", "aspx", "xhtml"} & IGNORED_EXTENSIONS


def test_invalid_urls_are_skipped_silently() -> None:
    html = anchors("http://", "http://host:99999/", "https:///nohost", "http://[::1/", "ok.html")
    assert links(html) == ["http://example.com/docs/guide/ok.html"]


def test_links_with_control_characters_go_through_urljoin() -> None:
    # urljoin removes tab and newline inside URLs, as browsers do.
    assert links(anchors("pa\nge.html", "http://exa\tmple.com/x")) == [
        "http://example.com/docs/guide/page.html",
        "http://example.com/x",
    ]


def test_page_url_with_query_and_no_path() -> None:
    assert links(anchors("a.html"), "http://example.com/dir/page?x=1") == [
        "http://example.com/dir/a.html"
    ]
    assert links(anchors("a.html", "?q"), "https://example.com") == [
        "https://example.com/a.html",
        "https://example.com/?q",
    ]


@pytest.mark.parametrize(
    "href",
    [
        "a.html",
        "/x/y.html?z=1",
        "../../up.html",
        "//other.org/p",
        "?only",
        "sub/./x.html",
        "sub/../x.html",
        "http://example.com:8080/p",
        "https://example.com/a%20b",
        "p\u00e4ge.html",
        "a;b.html",
        "%7Euser/",
    ],
)
def test_fast_paths_agree_with_urljoin(href: str) -> None:
    for base in (PAGE, "https://example.com:8443/a/b/?q=1", "http://user@example.com"):
        assert links(anchors(href), base) == [normalize(urljoin(base, href))]


def test_title_is_whitespace_collapsed() -> None:
    assert extract_title(parse_html("<title>\n  Hello \t  World\n</title>")) == "Hello World"


@pytest.mark.parametrize(
    "html",
    [
        "<p>no title</p>",
        "<title></title>",
        "<title>  \n </title>",
        "<svg><title>icon</title></svg>",
    ],
)
def test_missing_or_blank_title_is_none(html: str) -> None:
    assert extract_title(parse_html(html)) is None


def test_title_ignores_svg_titles() -> None:
    html = "<body><svg><title>icon</title></svg><title>Real</title></body>"
    assert extract_title(parse_html(html)) == "Real"


def test_title_keeps_entities_and_nested_markup_text() -> None:
    assert extract_title(parse_html("<title>A &amp; B &mdash; C</title>")) == "A & B \u2014 C"


def test_one_tree_serves_links_and_title() -> None:
    tree = parse_html("<title>T</title>" + anchors("a.html"))
    assert extract_title(tree) == "T"
    assert (
        extract_links(tree, PAGE)
        == extract_links(tree, PAGE)
        == ["http://example.com/docs/guide/a.html"]
    )


def test_random_relative_hrefs_resolve_as_urljoin_does() -> None:
    """Dot segments, queries and odd characters take cached or concatenating fast paths."""
    rng = random.Random(7)
    parts = ["a", "b.html", ".", "..", "x?y=1", "?q", "%41", ";p", "~u", "..."]  # no "a//b"
    bases = [PAGE, "https://example.com:8443/a/b/?q=1", "http://h.test", "http://h.test/d/e"]
    for _ in range(3000):
        href = "/".join(rng.choice(parts) for _ in range(rng.randint(1, 5)))
        if not href:
            continue  # an empty href is the page itself: skipped by design
        if rng.random() < 0.3:
            href = "/" + href
        base = rng.choice(bases)
        try:
            expected = [normalize(urldefrag(urljoin(base, href))[0])]
        except InvalidURL:
            expected = []
        assert links(anchors(href), base) == expected, (base, href)
