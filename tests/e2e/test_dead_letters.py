"""``crawlq dead list`` and ``crawlq dead replay`` on a host that fails until a flag flips.

A site on 127.0.0.1 links to two pages of a second host (127.0.0.2) that answers 503 while
its switch is down, and to a port where nothing listens. The crawl dead-letters all three;
``dead list`` shows them with the page that linked to them; ``dead replay --dry-run`` changes
nothing; after the switch flips, ``dead replay --host`` puts back only the second host's, and
the next crawl stores each of them once, with one more request each (the server's log).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

from crawlq.testing import RequestLog, fault_state, make_fault_app
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq


def _site_app(links: list[str]) -> web.Application:
    async def index(request: web.Request) -> web.Response:
        body = "".join(f'<a href="{href}">{href}</a>\n' for href in links)
        return web.Response(text=f"<title>Index</title>{body}", content_type="text/html")

    app = web.Application()
    app.router.add_get("/index.html", index)
    return app


def dead_rows(store: Path, *filters: str) -> list[dict[str, Any]]:
    proc = run_crawlq("dead", "list", "--store", str(store), "--json", *filters)
    return [json.loads(line) for line in proc.stdout.splitlines() if line]


def test_a_host_that_fails_until_a_flag_flips(tmp_path: Path) -> None:
    log = RequestLog()
    flaky_app = make_fault_app(log)
    fault_state(flaky_app).switch_down = True
    with ServerThread(flaky_app, host="127.0.0.2") as flaky:
        flaky_pages = [f"{flaky.base_url}/switch/a", f"{flaky.base_url}/switch/b"]
        gone = "http://127.0.0.1:9/gone"  # nothing listens there: connect_error
        with ServerThread(_site_app([*flaky_pages, gone])) as site:
            index = f"{site.base_url}/index.html"
            store = tmp_path / "crawl.db"
            crawl = (
                "crawl", index, "--store", str(store), "--max-retries", "0", "--delay", "0",
                "--ignore-robots", "--allow-private", "--allow-domain", "127.0.0.1",
                "--allow-domain", "127.0.0.2", "-q",
            )  # fmt: skip
            first = run_crawlq(*crawl)
            assert "dead-lettered: 3 (http_503 2, connect_error 1)" in first.stdout
            assert [log.count(f"/switch/{n}") for n in "ab"] == [1, 1]

            failing = dead_rows(store, "--reason", "http_503")
            assert sorted(r["url"] for r in failing) == flaky_pages
            assert {r["referrer"] for r in failing} == {index}  # the page that linked to them
            assert {(r["host"], r["attempts"]) for r in failing} == {(f"127.0.0.2:{flaky.port}", 1)}
            assert all(r["detail"] and r["at"] for r in failing)
            assert [r["url"] for r in dead_rows(store, "--reason", "connect_error")] == [gone]
            assert dead_rows(store, "--reason", "http_503", "--since", "1h") == failing
            assert dead_rows(store, "--since", "2999-01-01") == []
            table = run_crawlq("dead", "list", "--store", str(store), "--host", "127.0.0.2").stdout
            assert "2 dead letters" in table and "http_503" in table

            fault_state(flaky_app).switch_down = False  # the host is back
            before = store.read_bytes()
            dry = run_crawlq(
                "dead", "replay", "--store", str(store), "--host", "127.0.0.2", "--dry-run"
            )
            assert "would replay 2 dead letters (http_503 2); nothing changed" in dry.stdout
            assert store.read_bytes() == before
            assert len(dead_rows(store)) == 3
            story = json.loads(
                run_crawlq("inspect", flaky_pages[0], "--store", str(store), "--json").stdout
            )
            assert story["state"] == "dead" and story["details"]["referrer"] == index

            replayed = run_crawlq(
                "dead", "replay", "--store", str(store), "--host", "127.0.0.2", "--json"
            )
            assert json.loads(replayed.stdout) == {
                "replayed": 2, "by_reason": {"http_503": 2}, "out_of_scope": 0, "dry_run": False,
                "waited_for_room": False, "dropped_frontier_full": 0, "left_full": 0,
            }  # fmt: skip
            assert [r["url"] for r in dead_rows(store)] == [gone]  # only the other host's left
            queued = json.loads(
                run_crawlq("inspect", flaky_pages[1], "--store", str(store), "--json").stdout
            )
            assert (queued["state"], queued["details"]["attempts"]) == ("queued", 0)

            second = run_crawlq(*crawl)  # resumes: fetches what was replayed
            assert "dead-lettered: 1 (connect_error 1)" in second.stdout
            assert [log.count(f"/switch/{n}") for n in "ab"] == [2, 2]  # once more each
            pages = [
                json.loads(line)
                for line in run_crawlq(
                    "export", "--store", str(store), "--what", "pages"
                ).stdout.splitlines()
            ]
            stored = sorted((p["url"], p["status"], p["referrer"]) for p in pages)
            assert stored == sorted(
                [(index, 200, None)] + [(url, 200, index) for url in flaky_pages]
            )
            again = run_crawlq("dead", "replay", "--store", str(store), "--host", "127.0.0.2")
            assert "replayed 0 dead letters" in again.stdout


def test_a_cookie_wall_that_never_lets_the_crawler_through_says_so(tmp_path: Path) -> None:
    """A page that always answers 302 + a new Set-Cookie back to itself ends as a dead letter
    whose detail (``dead list``) names the cookie wall, the cookie and the chain."""
    log = RequestLog()
    with ServerThread(make_fault_app(log)) as site:
        url = f"{site.base_url}/cookie-wall/count?count=1"
        store = tmp_path / "crawl.db"
        proc = run_crawlq(
            "crawl", url, "--store", str(store), "--delay", "0",
            "--ignore-robots", "--allow-private", "-q", check=False,
        )  # fmt: skip
        assert proc.returncode == 4, proc.stderr  # its only seed is dead: no page stored
        assert log.count("/cookie-wall/count") == 11  # the first and max_redirects (10) more
        [row] = dead_rows(store)
        assert (row["url"], row["reason"]) == (url, "too_many_redirects")
        detail = row["detail"] or ""
        assert "cookie wall" in detail and "wall_count" in detail, detail
        assert detail.count(url) == 12, detail  # the chain: 11 requests, then the Location
        assert "=1" not in detail.replace("count=1", ""), detail  # no cookie value
