"""Crawls through proxies (`crawlq.rules.proxies`): every request via the proxy, bench, secrets."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from crawlq.testing import RequestLog, ServerThread
from crawlq.testing.proxy import HttpProxy, Socks5Proxy
from tests.conftest import run_crawlq

SECRET = "pr0xy-s3cret"
PAGES = 6


def _site(log: RequestLog) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        links = "".join(f'<a href="/p/{i}">{i}</a>' for i in range(PAGES) if i != n)
        return web.Response(
            text=f"<html><title>p{n}</title>{links}</html>", content_type="text/html"
        )

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/p/{n}", page)
    return app


@pytest.fixture
def site() -> Iterator[tuple[str, RequestLog]]:
    log = RequestLog()
    with ServerThread(_site(log)) as server:
        yield server.base_url, log


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _crawl(tmp_path: Path, base: str, *proxies: str, env: dict[str, str] | None = None):
    args = ["crawl", f"{base}/p/0", "--store", str(tmp_path / "c.db"), "--delay", "0"]
    args += ["--ignore-robots", "--max-retries", "0", "--warc", str(tmp_path / "warc")]
    for proxy in proxies:
        args += ["--proxy", proxy]
    return run_crawlq(*args, "-vv", env=env)


def _stored(tmp_path: Path) -> tuple[int, int]:
    with sqlite3.connect(tmp_path / "c.db") as conn:
        pages = conn.execute("SELECT count(*) FROM pages").fetchone()[0]
        dead = conn.execute("SELECT count(*) FROM dead_letters").fetchone()[0]
    return int(pages), int(dead)


def test_every_request_of_a_crawl_goes_through_the_proxy(tmp_path, site) -> None:
    base, log = site
    with HttpProxy(user="bob", password=SECRET) as proxy:
        env = {"CRAWLQ_PROXIES": f"http://bob:{SECRET}@{proxy.address}"}
        proc = _crawl(tmp_path, base, env=env)
    assert _stored(tmp_path) == (PAGES, 0)
    assert sorted(proxy.log) == sorted(f"GET {base}/p/{i}" for i in range(PAGES))
    assert log.count() == PAGES  # the origin saw exactly the proxy's requests
    assert SECRET not in proc.stdout + proc.stderr
    files = [*tmp_path.rglob("*")]
    assert not any(SECRET.encode() in f.read_bytes() for f in files if f.is_file())


def test_a_crawl_through_a_socks5_proxy(tmp_path, site) -> None:
    base, log = site
    with Socks5Proxy(user="bob", password=SECRET) as proxy:
        proc = _crawl(
            tmp_path, base, env={"CRAWLQ_PROXIES": f"socks5://bob:{SECRET}@{proxy.address}"}
        )
    assert _stored(tmp_path) == (PAGES, 0)
    host = base.removeprefix("http://")
    assert proxy.log and set(proxy.log) == {f"SOCKS {host}"}  # kept-alive tunnels
    assert proxy.auth and set(proxy.auth) == {f"bob:{SECRET}"} and log.count() == PAGES
    assert SECRET not in proc.stdout + proc.stderr


def test_a_refusing_proxy_is_benched_and_the_crawl_completes_through_the_other(
    tmp_path, site
) -> None:
    base, log = site
    bad = f"http://bob:{SECRET}@127.0.0.1:{_closed_port()}"
    with HttpProxy() as good:
        proc = _crawl(
            tmp_path, base, good.address and f"http://{good.address}", bad,
            env={"CRAWLQ_PROXY_ROTATION": "request", "CRAWLQ_PROXY_BENCH_S": "600"},
        )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert _stored(tmp_path) == (PAGES, 0)  # no URL dead-lettered, with --max-retries 0
    assert "benched for" in out and "retry " not in out
    assert len(good.log) == PAGES and log.count() == PAGES
    assert SECRET not in out


def test_crawlq_fetch_goes_through_the_proxy(site) -> None:
    base, log = site
    with HttpProxy() as proxy:
        proc = run_crawlq("fetch", f"{base}/p/1", "--proxy", f"http://{proxy.address}")
    assert "<title>p1</title>" in proc.stdout
    assert proxy.log == [f"GET {base}/robots.txt", f"GET {base}/p/1"]  # robots.txt too
    assert log.count() == 2


@pytest.mark.parametrize("command", ["fetch", "parse"])
def test_crawlq_fetch_names_the_failed_proxy_and_why_without_its_password(
    site, command: str
) -> None:
    """User trial: a dead proxy printed only ``proxy_failed: URL`` (no proxy, no reason)."""
    base, log = site
    port = _closed_port()
    proc = run_crawlq(
        command, f"{base}/p/1", "--proxy", f"http://pu:{SECRET}@127.0.0.1:{port}/", check=False
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(
        f"crawlq: cannot fetch {base}/p/1: proxy http://127.0.0.1:{port} failed"
        " (proxy_connect_error)"
    ), proc.stderr
    assert SECRET not in proc.stderr and "pu:" not in proc.stderr
    assert log.count() == 0  # nothing reached the site around the proxy
