"""Pages built to hurt the parser: nesting depth estimated before parsing, link tags capped."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from crawlq.engine.pagework import STOP_GRACE_S, PageTimeout, PageWork
from crawlq.links import (
    DEPTH_CHECK_MIN_TAGS,
    cut_at_links,
    extract_links,
    html_depth_over,
    parse_html,
    screen_html,
)

PAGE = "http://example.org/docs/index.html"


def _deep(n: int, tag: str = "div") -> str:
    return f"<!doctype html><title>deep</title><body>{f'<{tag}>' * n}x"


@pytest.mark.parametrize(
    "html",
    [
        _deep(100_000),
        _deep(600, "span"),
        _deep(600, "b"),  # formatting elements nest in the tree too
        "<table><tr><td>" * 600,  # td and tr are not levels, each table is
        "<div><!-- </div> -->" * 600,  # an end tag in a comment closes nothing
        "<div/>" * 600,  # "/>" does not close an HTML element
        "<ul><li>" * 600,
    ],
    ids=["div-100k", "span", "b", "tables", "comment", "self-closing-div", "lists"],
)
def test_a_deeply_nested_page_is_over_the_cap(html: str) -> None:
    assert html_depth_over(html, 512) == 513
    padded = html + "<br>" * DEPTH_CHECK_MIN_TAGS  # enough "<" for screen_html to check it
    assert screen_html(padded, 512, 10_000).too_deep == 513


def test_a_page_with_few_tags_is_not_checked_before_parsing() -> None:
    # At most DEPTH_CHECK_MIN_TAGS "<": it cannot nest deeper, and lexbor parses it in ms.
    assert screen_html(_deep(2000), 512, 10_000).too_deep is None
    assert screen_html(_deep(3000), 512, 10_000).too_deep == 513


@pytest.mark.parametrize(
    "html",
    [
        "<p>para" * 5000,  # unclosed <p>: each closes the one before
        "<li>item" * 5000,
        "line<br>" * 5000,
        "<img src=x.png>" * 5000,
        "<svg>" + "<path d='M0 0'/>" * 5000 + "</svg>",  # "/>" closes inside SVG
        "<a href=x>link" * 5000,  # an <a> closes the open one
        "<h1>a<h2>b" * 3000,
        "<div><span>x</div>" * 3000,  # the </div> closes the span left open
        "<script>if (a<b) { x = '<div>'; }</script>" * 3000,
        "<table>" + "<tr><td>cell" * 5000 + "</table>",
        "<div><div><div>x</div></div></div>" * 3000,
    ],
    ids=["p", "li", "br", "img", "svg", "a", "headings", "sloppy", "script", "table", "flat"],
)
def test_wide_but_shallow_pages_pass(html: str) -> None:
    assert html_depth_over(html, 512) is None
    assert screen_html(html, 512, 10_000).too_deep is None


def test_a_page_with_few_tags_is_not_scanned() -> None:
    assert html_depth_over(_deep(500), 512) is None  # fewer "<" than the cap: cannot be deeper
    assert html_depth_over(_deep(513), 512) == 513


def test_a_page_over_the_link_cap_is_cut_before_the_first_link_over_it() -> None:
    html = "<title>many</title>" + "".join(f'<a href="/p{i}">{i}</a>' for i in range(20_000))
    markup, found = cut_at_links(html, 100)
    assert found == 20_000
    assert markup.endswith('<a href="/p99">99</a>')
    links = extract_links(parse_html(markup), PAGE)
    assert len(links) == 100 and links[-1] == "http://example.org/p99"
    screened = screen_html(html, 512, 100)
    assert (screened.markup, screened.link_tags) == (markup, 20_000)


def test_a_page_under_the_link_cap_is_kept_whole() -> None:
    html = "<title>few</title>" + '<a href="/x">x</a><abbr>y</abbr>' * 100
    assert cut_at_links(html, 100) == (html, 0)
    assert screen_html(html, 512, 100).markup is html


def test_extract_links_stops_at_its_limit() -> None:
    tree = parse_html("".join(f'<a href="/p{i}">{i}</a>' for i in range(50)))
    assert extract_links(tree, PAGE, limit=10) == [f"http://example.org/p{i}" for i in range(10)]


# -- the page thread ----------------------------------------------------------------------------


async def test_page_work_runs_off_the_loop_and_returns_or_raises() -> None:
    work = PageWork()
    try:
        loop_thread = threading.get_ident()
        assert await work.run(threading.get_ident, 5.0) != loop_thread
        with pytest.raises(ZeroDivisionError):
            await work.run(lambda: 1 / 0, 5.0)
    finally:
        work.close()


async def test_a_job_past_its_budget_times_out_and_a_fresh_thread_takes_the_next() -> None:
    work = PageWork()
    release = threading.Event()
    try:
        stuck = asyncio.create_task(work.run(lambda: release.wait(30), 0.3))
        queued = asyncio.create_task(work.run(lambda: "next", 0.3))
        ticks = 0
        while not stuck.done():  # the loop keeps running meanwhile
            await asyncio.sleep(0.01)
            ticks += 1
        with pytest.raises(PageTimeout):
            stuck.result()
        assert await queued == "next"  # queued behind the stuck job: not timed out itself
        assert ticks > 10 and work.abandoned == 1
    finally:
        release.set()
        work.close()


async def test_hurry_gives_up_on_a_running_job_after_the_grace() -> None:
    work = PageWork()
    release = threading.Event()
    try:
        task = asyncio.create_task(work.run(lambda: release.wait(30), 60.0))
        await asyncio.sleep(0.1)
        started = time.monotonic()
        work.hurry()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < STOP_GRACE_S + 5  # not the 60 s budget
    finally:
        release.set()
        work.close()
