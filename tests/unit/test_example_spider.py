"""PgDocsSpider's callbacks over real pages of the PostgreSQL 15 manual.

The pages come from the corpus tarball (``$CRAWLQ_TEST_CORPUS``, a tarball or an unpacked
directory, else ``../shared/corpora/postgresql-15-docs.tar.gz`` next to the repository);
without it, from small hand-written pages of the same structure, so the test never skips.
"""

from __future__ import annotations

import asyncio
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from crawlq.request import CrawlRequest, FetchResult
from crawlq.spider import Response, Spider, load_spider, run_callback

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "pg_docs_spider.py"
ROOT = "http://127.0.0.1:8000/"
PAGES = (
    "sql-select.html",
    "sql-commands.html",
    "queries-with.html",
    "tutorial-sql.html",
    "index.html",
    "app-psql.html",
)

_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
    '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">'
    '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{title}</title>'
    '<link rel="stylesheet" type="text/css" href="stylesheet.css" /></head><body id="docContent">'
    '<div class="navheader"><table><tr><td><a accesskey="p" href="prev.html">Prev</a></td>'
    '<td><a accesskey="u" href="{up}">Up</a></td>'
    '<td><a accesskey="h" href="index.html">Home</a></td>'
    "</tr></table><hr /></div>"
)
_TAIL = "</body></html>"

FALLBACK = {
    "sql-select.html": _HEAD.format(title="SELECT", up="sql-commands.html")
    + '<div class="refentry" id="SQL-SELECT"><div class="titlepage"></div>'
    '<a id="id-1" class="indexterm"></a><div class="refnamediv">'
    '<h2><span class="refentrytitle">SELECT</span></h2>'
    "<p>SELECT, TABLE, WITH \u2014 retrieve rows from a table or view</p></div>"
    '<div class="refsynopsisdiv"><h2>Synopsis</h2><pre class="synopsis">\n'
    '[ WITH [ RECURSIVE ] <em class="replaceable"><code>with_query</code></em> [, ...] ]\n'
    'SELECT [ ALL | DISTINCT ] <em class="replaceable"><code>expression</code></em>\n'
    '</pre></div><p>See <a class="xref" href="sql-select.html#SQL-WITH">WITH</a>, '
    '<a class="link" href="sql-values.html">VALUES</a> and '
    '<a class="xref" href="queries-with.html#QUERIES-WITH-SEARCH">7.8.2.1</a>.</p></div>' + _TAIL,
    "sql-commands.html": _HEAD.format(title="SQL Commands", up="reference.html")
    + '<div class="reference" id="SQL-COMMANDS"><div class="titlepage"><div><div>'
    '<h1 class="title">SQL Commands</h1></div></div><hr /></div><div class="toc"><dl class="toc">'
    '<dt><span class="refentrytitle"><a href="sql-abort.html">ABORT</a></span></dt>'
    '<dt><span class="refentrytitle"><a href="sql-select.html">SELECT</a></span></dt>'
    "</dl></div></div>" + _TAIL,
    "queries-with.html": _HEAD.format(
        title="7.8. WITH Queries (Common Table Expressions)", up="queries.html"
    )
    + '<div class="sect1" id="QUERIES-WITH"><div class="titlepage"><div><div>'
    '<h2 class="title">7.8. '
    '<code class="literal">WITH</code> Queries (Common Table Expressions)</h2></div></div></div>'
    '<div class="toc"><dl class="toc"><dt><span class="sect2">'
    '<a href="queries-with.html#QUERIES-WITH-SELECT">7.8.1.</a></span></dt></dl></div>'
    '<p>See <a class="xref" href="sql-select.html" title="SELECT">SELECT</a>.</p></div>' + _TAIL,
    "tutorial-sql.html": _HEAD.format(title="Chapter 2. The SQL Language", up="tutorial.html")
    + '<div class="chapter" id="TUTORIAL-SQL"><div class="titlepage"><div><div><h2 class="title">'
    'Chapter 2. The <acronym class="acronym">SQL</acronym> Language</h2></div></div></div>'
    '<div class="toc"><dl class="toc"><dt><span class="sect1"><a href="tutorial-sql-intro.html">'
    "2.1. Introduction</a></span></dt></dl></div></div>" + _TAIL,
    "index.html": _HEAD.format(title="PostgreSQL 15.0 Documentation", up="index.html")
    + '<div class="book" id="POSTGRES"><div class="titlepage"><div><div><h1 class="title">'
    'PostgreSQL 15.0 Documentation</h1></div></div></div><div class="toc"><dl class="toc">'
    '<dt><span class="part"><a href="tutorial.html">I. Tutorial</a></span></dt>'
    '<dt><span class="reference"><a href="sql-commands.html">SQL Commands</a></span></dt>'
    "</dl></div></div>" + _TAIL,
    "app-psql.html": _HEAD.format(title="psql", up="reference-client.html")
    + '<div class="refentry" id="APP-PSQL"><div class="titlepage"></div><div class="refnamediv">'
    '<h2><span class="refentrytitle"><span class="application">psql</span></span></h2>'
    '<p><span class="application">psql</span> \u2014 interactive terminal</p></div>'
    '<div class="refsynopsisdiv"><h2>Synopsis</h2><div class="cmdsynopsis"><p>'
    '<code class="command">psql</code> [<em class="replaceable"><code>option</code></em>...]</p>'
    "</div></div></div>" + _TAIL,
}


def _corpus_location() -> Path | None:
    configured = os.environ.get("CRAWLQ_TEST_CORPUS")
    candidates = [Path(configured)] if configured else []
    candidates.append(REPO.parent / "shared" / "corpora" / "postgresql-15-docs.tar.gz")
    return next((p for p in candidates if p.exists()), None)


def _read_pages() -> tuple[str, dict[str, bytes]]:
    location = _corpus_location()
    if location is None:
        return "hand-written", {name: html.encode() for name, html in FALLBACK.items()}
    if location.is_dir():
        found = {p.name: p for p in location.rglob("*.html") if p.name in PAGES}
        return str(location), {name: found[name].read_bytes() for name in PAGES}
    with tarfile.open(location) as tar:
        members = {Path(m.name).name: m for m in tar.getmembers() if Path(m.name).name in PAGES}
        pages = {}
        for name in PAGES:
            fh = tar.extractfile(members[name])
            assert fh is not None
            with fh:
                pages[name] = fh.read()
    return str(location), pages


SOURCE, RAW_PAGES = _read_pages()


@pytest.fixture(scope="module")
def spider() -> Spider:
    return load_spider(f"{EXAMPLE}:PgDocsSpider")()


def response(name: str, callback: str | None = None) -> Response:
    url = ROOT + name
    body = RAW_PAGES[name]
    result = FetchResult(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html; charset=UTF-8"},
        body=body,
        encoding="utf-8",
        text=body.decode("utf-8"),
        elapsed_s=0.0,
    )
    return Response(CrawlRequest(url=url, depth=1, callback=callback), result)


def crawl(
    spider: Spider, name: str, callback: str | None = None
) -> tuple[list[dict[str, Any]], list[CrawlRequest]]:
    return asyncio.run(run_callback(spider, response(name, callback)))


def test_spider_identity(spider: Spider) -> None:
    assert type(spider).__name__ == "PgDocsSpider"
    assert spider.name == "pg_docs"
    print(f"pages from {SOURCE}")


def test_sql_command_page(spider: Spider) -> None:
    items, requests = crawl(spider, "sql-select.html", "parse_command")
    assert items == [
        {
            "command": "SELECT",
            "names": ["SELECT", "TABLE", "WITH"],
            "purpose": "retrieve rows from a table or view",
            "synopsis": items[0]["synopsis"],
            "url": ROOT + "sql-select.html",
        }
    ]
    synopsis = items[0]["synopsis"]
    assert synopsis.startswith("[ WITH [ RECURSIVE ] with_query [, ...] ]\nSELECT [ ALL | DISTINCT")
    assert "<em" not in synopsis and synopsis == synopsis.strip()
    assert requests


def test_links_are_routed_by_page_kind(spider: Spider) -> None:
    _, requests = crawl(spider, "sql-select.html", "parse_command")
    by_url = {r.url: r for r in requests}
    assert ROOT + "sql-select.html" in by_url  # the page's own #anchors, fragment dropped
    assert by_url[ROOT + "sql-values.html"].callback == "parse_command"
    assert by_url[ROOT + "queries-with.html"].callback == "parse"
    assert not any(url.endswith(".css") for url in by_url)
    assert len(by_url) == len(requests)  # no duplicates
    for request in requests:
        assert request.depth == 2 and request.priority == -2
        assert CrawlRequest.from_json(request.to_json()) == request


def test_non_command_sql_page_falls_back_to_a_page_item(spider: Spider) -> None:
    items, requests = crawl(spider, "sql-commands.html", "parse_command")
    assert items == [
        {"title": "SQL Commands", "section": None, "level": None, "url": ROOT + "sql-commands.html"}
    ]
    assert {r.callback for r in requests if "/sql-" in r.url} == {"parse_command"}


@pytest.mark.parametrize(
    ("name", "title", "section", "level"),
    [
        ("queries-with.html", "WITH Queries (Common Table Expressions)", "7.8", "section"),
        ("tutorial-sql.html", "The SQL Language", "2", "chapter"),
        ("app-psql.html", "psql", None, None),
    ],
)
def test_page_items(
    spider: Spider, name: str, title: str, section: str | None, level: str | None
) -> None:
    items, requests = crawl(spider, name)
    assert items == [{"title": title, "section": section, "level": level, "url": ROOT + name}]
    assert requests


def test_index_page(spider: Spider) -> None:
    items, requests = crawl(spider, "index.html")
    assert items[0]["title"].startswith("PostgreSQL 15")
    assert items[0]["section"] is None
    urls = {r.url for r in requests}
    assert {ROOT + "tutorial.html", ROOT + "sql-commands.html"} <= urls
    assert all(r.url.startswith("http") for r in requests)
