"""End to end: ``crawlq crawl`` as a user runs it, on a whole real site served on loopback."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread
from tests.conftest import corpus_tarball, run_crawlq

from .sitemap import reachable

pytestmark = pytest.mark.e2e

FAST = ["--delay", "0", "--host-concurrency", "16", "-q"]


@pytest.fixture(scope="module")
def served(site_root: Path):
    with ServerThread(make_static_app(site_root)) as server:
        base = server.base_url + "/"
        expected, missing = reachable(site_root, base)
        yield base, expected, missing


def export_rows(store: Path, what: str) -> list[dict]:
    out = run_crawlq("export", "--store", str(store), "--what", what).stdout
    return [json.loads(line) for line in out.splitlines() if line]


def assert_each_page_once(store: Path, expected: set[str], missing: set[str]) -> None:
    pages = export_rows(store, "pages")
    urls = Counter(p["url"] for p in pages)
    assert [u for u, n in urls.items() if n > 1] == [], "pages stored twice"
    assert set(urls) == expected | missing
    assert {p["url"] for p in pages if p["status"] == 200} == expected
    assert {p["url"] for p in pages if p["status"] == 404} == missing
    assert export_rows(store, "dead") == []
    for page in pages:
        assert page["final_url"] == page["url"]
        assert page["fetched_at"].endswith("Z")
        assert page["size"] > 0


def test_crawl_whole_site_each_page_once(served, tmp_path: Path, site_root: Path) -> None:
    base, expected, missing = served
    if corpus_tarball() is not None:
        assert len(expected) == 1169  # the PostgreSQL 15 manual
        assert not missing
    store = tmp_path / "crawl.db"
    proc = run_crawlq("crawl", base + "index.html", "--store", str(store), *FAST)
    assert "crawl finished" in proc.stdout
    assert f"pages stored: {len(expected) + len(missing)} this run" in proc.stdout
    assert_each_page_once(store, expected, missing)
    pages = export_rows(store, "pages")
    by_url = {p["url"]: p for p in pages}
    assert by_url[base + "index.html"]["depth"] == 0
    assert by_url[base + "index.html"]["title"]
    assert all(p["content_type"] == "text/html" for p in pages if p["status"] == 200)

    again = run_crawlq("crawl", base + "index.html", "--store", str(store), *FAST)
    assert "pages stored: 0 this run" in again.stdout  # a finished crawl stays finished
    assert_each_page_once(store, expected, missing)


def _stored_pages(store: Path) -> int:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT count(*) FROM pages").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_sigkill_mid_crawl_then_resume_stores_each_page_once(served, tmp_path: Path) -> None:
    base, expected, missing = served
    store = tmp_path / "killed.db"
    args = [sys.executable, "-m", "crawlq", "crawl", base + "index.html", "--store", str(store)]
    # Slow enough (concurrency 4, a small delay) that the kill lands mid-crawl.
    slow = ["--delay", "0.002", "--host-concurrency", "4", "--concurrency", "4", "-q"]
    kills = 0
    for threshold in (len(expected) // 5, len(expected) // 2):
        proc = subprocess.Popen(args + slow, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while _stored_pages(store) < threshold and proc.poll() is None:
            assert time.monotonic() < deadline, "crawl made no progress"
            time.sleep(0.02)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(timeout=10)
    assert kills >= 1, "the crawl finished before it could be killed"
    assert _stored_pages(store) < len(expected) + len(missing)
    proc2 = run_crawlq("crawl", base + "index.html", "--store", str(store), *FAST)
    assert "crawl finished" in proc2.stdout
    assert_each_page_once(store, expected, missing)


def test_sigint_stops_gracefully_and_resumes(served, tmp_path: Path) -> None:
    base, expected, missing = served
    store = tmp_path / "interrupted.db"
    args = [sys.executable, "-m", "crawlq", "crawl", base + "index.html", "--store", str(store)]
    slow = ["--delay", "0.002", "--host-concurrency", "4", "--concurrency", "4", "-q"]
    proc = subprocess.Popen(args + slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _stored_pages(store) < len(expected) // 4 and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert "interrupted" in out
    with sqlite3.connect(store) as db:
        held = db.execute("SELECT count(*) FROM frontier_requests WHERE state IN (1, 5)")
        leased = held.fetchone()[0]
    assert leased == 0, "graceful stop must settle or release every lease"
    run_crawlq("crawl", base + "index.html", "--store", str(store), *FAST)
    assert_each_page_once(store, expected, missing)
