"""An embedded crawl on several processes (`crawlq.engine.local_crawl`): the invariants hold.

``crawlq crawl --processes 2`` without ``--frontier``: this process owns the SQLite file and
serves it to a worker process it starts once the queue grows. The evidence is the store (every
page once, nothing missing) and the servers' request logs (each page fetched once when no
process dies; per-host politeness across both processes). The start of the worker process and
its share of the pages come from the owner's log lines (``-v``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crawlq.testing.request_log import RequestLog
from crawlq.testing.static import generate_site, make_static_app, slow_pages
from crawlq.testing.thread import ServerThread
from tests.e2e.sitemap import reachable
from tests.e2e.test_distributed import stored_count, stored_urls

pytestmark = pytest.mark.e2e

HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
DELAY_JITTER_S = 0.1
"""Room for one late send (lease-to-send latency on this loaded machine), seconds."""

_STARTED = re.compile(r"started 1 worker processes: \[(\d+)\]")
_CHILD_PAGES = re.compile(r"worker process \d+ stored (\d+) pages")


class _Site:
    """One generated site served on each of `HOSTS`, with one request log."""

    def __init__(self, root: Path, page_s: float) -> None:
        self.root = root
        self.log = RequestLog()
        self.servers = []
        for host in HOSTS:
            app = make_static_app(root, log=self.log)
            if page_s:
                app.middlewares.append(slow_pages(page_s))
            self.servers.append(ServerThread(app, host=host))

    def start(self) -> None:
        for server in self.servers:
            server.start()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def seeds(self) -> list[str]:
        return [f"{s.base_url}/index.html" for s in self.servers]

    def expected(self) -> set[str]:
        pages: set[str] = set()
        for server in self.servers:
            found, missing = reachable(self.root, server.base_url + "/")
            assert not missing
            pages |= found
        return pages


@pytest.fixture
def site(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[_Site]:
    page_s = getattr(request, "param", 0.0)
    served = _Site(generate_site(tmp_path / "site", n_pages=60), page_s)
    served.start()
    try:
        yield served
    finally:
        served.stop()


def _crawl(site: _Site, store: Path, err: Path, *options: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "crawlq", "crawl", *site.seeds(), "--store", str(store)]
    cmd += ["--allow-private", "--processes", "2", "-v", *options]
    with err.open("ab") as stderr:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _working_child(err: Path, crawl: subprocess.Popen[bytes], store: Path) -> int:
    """The pid of the crawl's worker process, once it has connected and pages keep coming."""
    found: list[int] = []

    def connected() -> bool:
        assert crawl.poll() is None, err.read_text()
        log = err.read_text()
        found[:] = [int(m) for m in _STARTED.findall(log)]
        return bool(found) and f"worker process {found[0]} connected" in log

    _wait_for(connected, 60, "the worker process to connect")
    then = stored_count(store)
    _wait_for(lambda: stored_count(store) >= then + 20, 60, "pages stored by both processes")
    return found[0]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("site", [0.1], indirect=True)  # slow pages: the crawl outlasts a start
def test_two_processes_store_every_page_of_three_hosts_once(site: _Site, tmp_path: Path) -> None:
    store, err = tmp_path / "store.db", tmp_path / "crawl.err"
    crawl = _crawl(site, store, err, "--delay", "0", "--host-concurrency", "2")
    assert crawl.wait(180) == 0, err.read_text()
    expected = site.expected()
    assert len(expected) == 3 * 60
    stored = stored_urls(store)
    assert set(stored) == expected
    assert set(stored.values()) == {1}
    # Each page was fetched once: the two processes never held one URL at once.
    fetched = Counter(f"http://{r.host}{r.path}" for r in site.log.requests())
    assert {url: n for url, n in fetched.items() if n > 1 and "robots" not in url} == {}
    log = err.read_text()
    assert _STARTED.search(log), log
    child_pages = [int(n) for n in _CHILD_PAGES.findall(log)]
    assert len(child_pages) == 1 and 0 < child_pages[0] < len(expected), log


@pytest.mark.parametrize("site", [0.02], indirect=True)
def test_politeness_holds_across_the_two_processes(site: _Site, tmp_path: Path) -> None:
    store, err = tmp_path / "store.db", tmp_path / "crawl.err"
    crawl = _crawl(site, store, err, "--delay", "0.1", "--host-concurrency", "1")
    assert crawl.wait(240) == 0, err.read_text()
    log = err.read_text()
    assert [int(n) > 0 for n in _CHILD_PAGES.findall(log)] == [True], log
    assert len(stored_urls(store)) == 3 * 60
    for server in site.servers:
        host = f"{server.host}:{server.port}"
        assert len(site.log.requests(host=host)) == 61  # its pages and robots.txt
        assert site.log.max_concurrency(host) == 1
        assert site.log.pace_violations(host, 0.1, DELAY_JITTER_S) == []


@pytest.mark.parametrize("site", [0.2], indirect=True)
def test_a_killed_worker_process_loses_nothing(site: _Site, tmp_path: Path) -> None:
    store, err = tmp_path / "store.db", tmp_path / "crawl.err"
    crawl = _crawl(site, store, err, "--delay", "0", "--host-concurrency", "4")
    child = _working_child(err, crawl, store)
    os.kill(child, signal.SIGKILL)
    assert crawl.wait(180) == 0, err.read_text()
    stored = stored_urls(store)
    assert set(stored) == site.expected()
    assert set(stored.values()) == {1}
    assert re.search(r"worker process \d+ went away holding \d+ leases", err.read_text())


@pytest.mark.parametrize("site", [0.2], indirect=True)
def test_a_killed_owner_stops_its_worker_and_a_rerun_completes(site: _Site, tmp_path: Path) -> None:
    store, err = tmp_path / "store.db", tmp_path / "crawl.err"
    options = ("--delay", "0", "--host-concurrency", "4")
    crawl = _crawl(site, store, err, *options)
    child = _working_child(err, crawl, store)
    crawl.send_signal(signal.SIGKILL)
    crawl.wait(30)
    _wait_for(lambda: not _alive(child), 30, "the worker process to exit")
    assert stored_count(store) < 3 * 60
    rerun = _crawl(site, store, err, *options)
    assert rerun.wait(180) == 0, err.read_text()
    stored = stored_urls(store)
    assert set(stored) == site.expected()
    assert set(stored.values()) == {1}
