"""IPv6 hosts in two notations, end to end: one host for scope, robots.txt, politeness, cookies.

A loopback page, seeded in one notation of its address, links pages in another notation of
the same address: ``[::ffff:7f00:1d]`` and ``[::ffff:127.0.0.29]`` (IPv4-mapped; the server
listens on 127.0.0.29, reached through a dual-stack socket), or ``[0:0:0:0:0:0:0:1]`` and
``[::0001]`` (the server listens on ``::1``). Both are one host (RFC 5952 text form): no
link is refused offsite or as a private address, robots.txt is asked for once, the
Crawl-delay holds across both notations (one request at a time, starts a delay apart, read
from the server's log), the cookie the seed set goes with the other notation's requests, and
every page is stored under the one written form of its URL.

Only loopback addresses are ever contacted (both forms above are loopback).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestServer

from crawlq.testing import RequestLog, fault_state, make_fault_app
from crawlq.testing.request_log import LoggedRequest
from tests.services import need_service

from .conftest import Results, crawl

CRAWL_DELAY_S = 0.3
DELAY_JITTER_S = 0.05  # lease-to-send latency under load (tests/engine/test_host_politeness.py)

CASES = {
    # listen address, seed notation, link notation, the one written form
    "ipv4-mapped": ("127.0.0.29", "[::ffff:7f00:1d]", "[::FFFF:127.0.0.29]", "[::ffff:127.0.0.29]"),
    "loopback": ("::1", "[0:0:0:0:0:0:0:1]", "[::0001]", "[::1]"),
}


def reachable(listen: str) -> bool:
    """Whether an IPv6 socket reaches a server listening on loopback ``listen`` here.

    ``127.0.0.29`` is reached as ``::ffff:127.0.0.29`` (a dual-stack socket, Linux's
    default), ``::1`` as itself; a machine without IPv6 reaches neither.
    """
    family = socket.AF_INET6 if ":" in listen else socket.AF_INET
    target = listen if ":" in listen else f"::ffff:{listen}"
    try:
        with socket.socket(family) as server, socket.socket(socket.AF_INET6) as client:
            server.bind((listen, 0))
            server.listen()
            client.settimeout(5)
            client.connect((target, server.getsockname()[1]))
    except OSError:
        return False
    return True


@contextlib.asynccontextmanager
async def serving(log: RequestLog, listen: str, robots_txt: str) -> AsyncIterator[int]:
    """The fault app on loopback ``listen``; yields its port."""
    app = make_fault_app(log)
    fault_state(app).robots_txt = robots_txt
    async with TestServer(app, host=listen) as server:
        assert server.port is not None
        yield server.port


def max_concurrency(requests: list[LoggedRequest]) -> int:
    """The most requests in progress at once, whatever their ``Host`` header said."""
    events = [(r.start_s, 1) for r in requests]
    events += [(r.end_s if r.end_s is not None else float("inf"), -1) for r in requests]
    running = best = 0
    for _, delta in sorted(events):
        running += delta
        best = max(best, running)
    return best


async def crawl_two_notations(
    db: Path, case: str, log: RequestLog, *, seed_both: bool
) -> tuple[Results, str]:
    """Crawl a page seeded in one notation that links pages in both (module docstring).

    Args:
        log: Records what the server saw.
        seed_both: Seed a page (``/status/200``) in the other notation too, so that both
            are seed hosts and in scope whatever the host keys say.

    Returns:
        The crawl, and the base URL every page should be stored under.
    """
    listen, seed_form, link_form, canonical = CASES[case]
    if not reachable(listen):
        need_service(f"IPv6 sockets do not reach a server on {listen} on this machine")
    robots = f"User-agent: *\nCrawl-delay: {CRAWL_DELAY_S}\n"
    async with serving(log, listen, robots) as port:
        links = [f"http://{link_form}:{port}/page/1", f"http://{seed_form}:{port}/page/2"]
        query = "&".join(f"link={quote(url, safe='')}" for url in links)
        seeds = [f"http://{seed_form}:{port}/set-cookie/s/v?{query}"]
        if seed_both:
            seeds.append(f"http://{link_form}:{port}/status/200")
        r = await crawl(db, seeds, delay_s=0, host_concurrency=4, max_depth=2)
    base = f"http://{canonical}:{port}"
    assert set(r.pages) == {
        f"{base}/set-cookie/s/v?{query}",
        *(f"{base}/page/{n}" for n in (1, 2, 3, 4)),
        *([f"{base}/status/200"] if seed_both else []),
    }
    assert all(page.status == 200 for page in r.pages.values())
    return r, base


@pytest.mark.parametrize("case", CASES)
async def test_a_link_in_another_notation_of_the_seed_address_is_not_offsite(
    db: Path, case: str, log: RequestLog
) -> None:
    r, _ = await crawl_two_notations(db, case, log, seed_both=False)
    assert set(r.report.counters.skipped) == {"max_depth"}  # no link offsite
    assert (r.dead, r.filtered) == ({}, {})  # none refused as a private address either
    linked = [req for req in log.requests() if req.path.startswith("/page/")]
    assert [req.cookie for req in linked] == ["s=v"] * 4  # the seed's cookie, either notation


@pytest.mark.parametrize("case", CASES)
async def test_two_notations_of_one_address_share_robots_txt_and_a_politeness_slot(
    db: Path, case: str, log: RequestLog
) -> None:
    r, _ = await crawl_two_notations(db, case, log, seed_both=True)
    assert (r.dead, r.filtered) == ({}, {})
    assert len(log.requests(path="/robots.txt")) == 1  # one origin, one robots.txt
    assert len({req.host for req in log.requests()}) == 1  # one Host header for them all
    pages = [req for req in log.requests() if req.path != "/robots.txt"]
    assert len(pages) == 6
    assert max_concurrency(pages) == 1  # one politeness slot for both notations
    starts = [req.start_s for req in pages]
    assert min(b - a for a, b in itertools.pairwise(starts)) >= CRAWL_DELAY_S - DELAY_JITTER_S
