"""Redirects back to the page just fetched: followed once, and a loop ends as ``redirect_loop``.

A ``302 Location: /p#top`` for ``/p``, or ``/p?b=2&a=1`` for ``/p?a=1&b=2``, names a URL
whose canonical form is the source's own, so dedup alone would drop it (issue 23, item 1).
Each test reads the fault server's request log to show what was fetched, and how often.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawlq.testing import RequestLog
from crawlq.urls import normalize

from .conftest import assert_nothing_lost, crawl


async def test_a_redirect_to_its_own_fragment_is_fetched_again(
    db: Path, base: str, log: RequestLog, frontier: dict[str, Any]
) -> None:
    url = f"{base}/self-redirect/f"
    r = await crawl(db, [url], **frontier)
    assert_nothing_lost(r, [url])
    (page,) = r.page_list  # the 200 replaced the 302: one record for the URL
    assert (page.url, page.status, page.title, page.error) == (url, 200, "Self f", None)
    assert page.final_url == url
    assert log.count("/self-redirect/f") == 2
    assert r.counts.pages_by_status == {200: 1}
    assert r.counts.dead_by_reason == {}


@pytest.mark.parametrize(
    ("seed", "target"),
    [  # the canonical order is by name (a, b): the server wants the other one, or this one
        ("/query-order/desc?a=1&b=2", "/query-order/desc?b=2&a=1"),
        ("/query-order/asc?b=2&a=1", "/query-order/asc?a=1&b=2"),
    ],
)
async def test_a_redirect_that_reorders_the_query_is_fetched_again(
    db: Path, base: str, log: RequestLog, frontier: dict[str, Any], seed: str, target: str
) -> None:
    url = normalize(base + seed)
    r = await crawl(db, [url], **frontier)
    (page,) = r.page_list
    query = target.partition("?")[2]
    # the record is the last response's: its URL is the one fetched, in the server's order
    assert (page.url, page.status, page.title) == (base + target, 200, f"Query {query}")
    assert log.count(seed.partition("?")[0]) == 2  # the seed, then the server's order
    assert r.report.frontier.pending == 0
    assert r.counts.dead_by_reason == {}


async def test_a_page_that_redirects_to_itself_forever_is_a_redirect_loop(
    db: Path, base: str, log: RequestLog, frontier: dict[str, Any]
) -> None:
    url = f"{base}/self-redirect/x?forever=1"
    r = await crawl(db, [url], **frontier)
    assert_nothing_lost(r, [url])
    dead = r.dead[url]
    assert (dead.reason, dead.attempts) == ("redirect_loop", 1)
    assert url in dead.detail
    assert log.count("/self-redirect/x") == 2  # followed once, then the loop is recorded
    assert r.counts.dead_by_reason == {"redirect_loop": 1}
    assert r.report.counters.dead == {"redirect_loop": 1}
