"""``crawlq dashboard`` in headless Chromium: the numbers it shows are ``crawlq status``'s.

A job stopped at ``--max-pages`` keeps a queue (nobody works on it), so its queue length is
fixed and must be shown exactly; its pages/s (acks over the last minute) can only fall
while the test runs, so the page's value lies between ``status --json`` read before and
after loading the page. The screenshot goes to ``$CRAWLQ_TEST_ARTIFACTS`` (default
``test-artifacts/`` in the repository).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from parsel import Selector, SelectorList

from crawlq.testing import RequestLog, make_fault_app
from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread
from crawlq.urls import host_key
from tests.conftest import REPO, run_crawlq
from tests.services import free_port, need_service

pytestmark = pytest.mark.e2e


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        need_service("no chromium browser (apt-get install chromium)")
    assert found is not None
    return found


def browse(url: str, *args: str) -> str:
    """Run headless Chromium on ``url`` with ``args`` (``--dump-dom``, ``--screenshot=…``).

    A profile of its own each time: two Chromiums on one profile (tests in parallel, two runs)
    hand the page to the first one's process instead of loading it.
    """
    with tempfile.TemporaryDirectory(prefix="crawlq-chromium-") as profile:
        proc = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={profile}", *args, url],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def artifacts() -> Path:
    path = Path(os.environ.get("CRAWLQ_TEST_ARTIFACTS", REPO / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Board:
    """A ``crawlq dashboard`` process; ``url`` once it serves."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "crawlq", "dashboard", "--port", str(self.port), *args],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()  # "crawlq dashboard on URL", once it is bound
        assert line.startswith("crawlq dashboard on "), line + self.proc.stderr.read()
        self.url = line.split(" on ", 1)[1].strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def stopped_job(site_root: Path, redis_url: str, job: str, tmp_path: Path) -> Iterator[Path]:
    """A job crawled to ``--max-pages 120`` of the manual: its queue stays as it is."""
    store = tmp_path / "store.db"
    with ServerThread(make_static_app(site_root)) as server:
        run_crawlq(
            "crawl", server.base_url + "/index.html", "--frontier", redis_url, "--job", job,
            "--store", str(store), "--processes", "1", "--max-pages", "120", "--delay", "0",
            "--host-concurrency", "8", "-q",
        )  # fmt: skip
        yield store


def status_json(redis_url: str, job: str) -> dict:
    return json.loads(run_crawlq("status", "--frontier", redis_url, "--job", job, "--json").stdout)


def test_dashboard_shows_what_status_shows(stopped_job: Path, redis_url: str, job: str) -> None:
    chromium()
    board = Board("--frontier", redis_url, "--job", job, "--store", str(stopped_job))
    try:
        before = status_json(redis_url, job)
        dom = browse(board.url, "--dump-dom")
        after = status_json(redis_url, job)
        browse(
            board.url,
            f"--screenshot={artifacts() / 'dashboard.png'}",
            "--window-size=1400,1000",
        )
    finally:
        board.stop()
    page = Selector(text=dom)
    section = page.css(f'section.job[data-job="{job}"]')
    assert section, dom[:2000]
    queued = int(section.css("dd.queue::text").get(""))
    assert before["queued"] > 0
    assert queued == before["queued"] == after["queued"]
    rate = float(section.css("dd.pages-per-s::text").get(""))
    assert before["pages_per_s"] > 0
    assert after["pages_per_s"] <= rate <= before["pages_per_s"]
    assert int(section.css("dd.stored::text").get("")) == before["stored"] == 120
    busiest = section.css("table.busiest tbody td::text").getall()
    assert busiest[:2] == [before["hosts"][0]["host"], str(before["hosts"][0]["queued"])]
    assert (artifacts() / "dashboard.png").stat().st_size > 0


def test_search_box_shows_canonical_url_fingerprint_and_stored_status(
    stopped_job: Path, redis_url: str, job: str
) -> None:
    board = Board("--frontier", redis_url, "--job", job, "--store", str(stopped_job))
    try:
        pages = run_crawlq("export", "--store", str(stopped_job), "--what", "pages").stdout
        seed = json.loads(pages.splitlines()[0])
        # a fragment is not part of the canonical URL
        query = urllib.parse.urlencode({"q": seed["url"] + "#top", "job": job})
        status, html = get(board.url + "inspect?" + query)
    finally:
        board.stop()
    assert status == 200
    cells = Selector(text=html).css("table.inspect td::text").getall()
    fields = dict(zip(cells[::2], cells[1::2], strict=True))
    assert fields["canonical URL"] == seed["url"]
    assert fields["fingerprint"] == seed["fingerprint"]
    assert fields["stored page"] == f"HTTP {seed['status']}"


def test_token_is_required_on_every_request(redis_url: str, job: str, stopped_job: Path) -> None:
    token = "s3cret-token"
    board = Board("--frontier", redis_url, "--job", job, "--token", token)
    try:
        for path in ("", "panel", "api/jobs", "inspect?q=http://x/", "static/dashboard.js"):
            assert get(board.url + path)[0] == 401, path
            assert get(board.url + path, {"Authorization": "Bearer wrong"})[0] == 401, path
            assert get(board.url + path + ("&" if "?" in path else "?") + "token=s3cret")[0] == 401
        status, body = get(board.url + "api/jobs", {"Authorization": f"Bearer {token}"})
        assert status == 200 and job in json.loads(body)
        assert get(board.url + f"?token={token}")[0] == 200
    finally:
        board.stop()


def test_binding_beyond_loopback_needs_a_token(redis_url: str, job: str) -> None:
    proc = run_crawlq(
        "dashboard", "--frontier", redis_url, "--job", job, "--host", "0.0.0.0",
        "--port", str(free_port()), check=False, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "needs --token" in proc.stderr


# -- every panel is the job's own: two jobs sharing one store ------------------------------


@dataclass
class SharedStore:
    """Two finished jobs that wrote into one SQLite store, and their servers' base URLs.

    ``docs`` crawled ``docs_base`` (5 pages) and dead-lettered one URL of ``broken_base``
    (``http_503``), then was paused; ``blog`` crawled ``blog_base`` (5 pages), dead-lettered
    nothing, and has one more URL queued that nobody works on (``queued_url``, seeded with a
    tracking parameter the job's URL rules strip).
    """

    store: Path
    docs: str
    blog: str
    docs_base: str
    blog_base: str
    broken_base: str
    queued_url: str


def pages_by_host(store: Path) -> dict[str, list[dict]]:
    """The exported pages of ``store`` by host, in the order the store streams them."""
    out = run_crawlq("export", "--store", str(store), "--what", "pages").stdout
    hosts: dict[str, list[dict]] = {}
    for line in out.splitlines():
        record = json.loads(line)
        hosts.setdefault(host_key(record["url"]), []).append(record)
    return hosts


@pytest.fixture
def other_job(redis_url: str) -> Iterator[str]:
    """A second job name of its own (the `job` fixture's twin), deleted afterwards."""
    import redis

    from crawlq.frontier.redis import Keyspace

    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=Keyspace(name).pattern()):
        client.unlink(key)
    client.close()


@pytest.fixture
def shared_store(redis_url: str, job: str, other_job: str, tmp_path: Path) -> Iterator[SharedStore]:
    store = tmp_path / "shared.db"
    common = ("--frontier", redis_url, "--store", str(store), "--processes", "1",
              "--delay", "0", "--max-depth", "2", "--max-retries", "0", "-q")  # fmt: skip
    docs_app, blog_app, broken_app = (make_fault_app(RequestLog()) for _ in range(3))
    with (
        ServerThread(docs_app) as docs,
        ServerThread(blog_app) as blog,
        ServerThread(broken_app) as broken,
    ):
        run_crawlq(
            "crawl", docs.base_url + "/page/1", broken.base_url + "/status/503",
            "--job", job, *common,
        )  # fmt: skip
        run_crawlq("crawl", blog.base_url + "/page/1", "--job", other_job, *common)
        queued = blog.base_url + "/page/99?utm_source=dashboard"
        run_crawlq(
            "seed", queued, "--frontier", redis_url, "--job", other_job, "--store", str(store)
        )
        run_crawlq("job", "pause", job, "--frontier", redis_url)
        yield SharedStore(
            store, job, other_job, docs.base_url, blog.base_url, broken.base_url, queued
        )


def wait_for_panels(board: Board, jobs: tuple[str, ...]) -> None:
    """Until the sampler has read the store for every job (each shows its slowest host)."""
    deadline = time.monotonic() + 60
    while True:
        page = Selector(text=get(board.url + "panel")[1])
        if all(
            page.css(f'section[data-job="{j}"] table.slowest tbody td').getall()[1:] for j in jobs
        ):
            return
        assert time.monotonic() < deadline, page.get()[:3000]
        time.sleep(0.5)


def section_rows(section: Selector | SelectorList[Selector], table: str) -> list[list[str]]:
    return [tr.css("td::text").getall() for tr in section.css(f"table.{table} tbody tr")]


def test_each_job_shows_only_its_own_dead_letters_and_hosts(
    shared_store: SharedStore, redis_url: str
) -> None:
    s = shared_store
    board = Board("--frontier", redis_url, "--job", s.docs, "--job", s.blog,
                  "--interval", "0.5")  # fmt: skip
    try:
        wait_for_panels(board, (s.docs, s.blog))
        dom = Selector(text=browse(board.url, "--dump-dom"))
        jobs = json.loads(get(board.url + "api/jobs")[1])
        browse(board.url, f"--screenshot={artifacts() / 'dashboard-two-jobs.png'}",
               "--window-size=1400,1400")  # fmt: skip
    finally:
        board.stop()
    stored = pages_by_host(s.store)
    docs_host, blog_host = host_key(s.docs_base), host_key(s.blog_base)
    assert sorted(stored) == sorted([docs_host, blog_host]) and len(stored[docs_host]) == 5

    def slowest(host: str) -> list[str]:
        times = [p["elapsed_s"] for p in stored[host]]
        total = 0.0
        for t in times:  # summed in the store's order, as the dashboard sums them
            total += t
        return [host, f"{total / len(times) * 1000:.1f}", str(len(times))]

    docs = dom.css(f'section.job[data-job="{s.docs}"]')
    blog = dom.css(f'section.job[data-job="{s.blog}"]')
    assert section_rows(docs, "dead-reasons") == [["http_503", "1"]]
    assert section_rows(blog, "dead-reasons") == [["none"]]
    assert section_rows(docs, "slowest") == [slowest(docs_host)]
    assert section_rows(blog, "slowest") == [slowest(blog_host)]
    assert int(docs.css("dd.stored::text").get("")) == 5 == int(blog.css("dd.stored::text").get(""))
    # the paused job says so at the top of the page, and so does the JSON
    assert [p.attrib["data-job"] for p in dom.css("main#jobs > p.notice.paused")] == [s.docs]
    assert dom.css("main#jobs > *")[0].attrib["class"] == "notice paused"
    assert docs.css("h2 .paused::text").get() == "paused" and not blog.css("h2 .paused")
    assert jobs[s.docs]["paused"] is True and jobs[s.blog]["paused"] is False


def search(board: Board, query: str, job: str) -> dict[str, list[str]]:
    """The search box's answer on the page, as Chromium renders ``/?q=QUERY&job=JOB``."""
    url = board.url + "?" + urllib.parse.urlencode({"q": query, "job": job})
    cells = Selector(text=browse(url, "--dump-dom")).css("#inspect table.inspect tbody tr")
    fields: dict[str, list[str]] = {}
    for row in cells:
        label, value = row.css("td::text").getall()
        fields.setdefault(label, []).append(value)
    return fields


def test_search_box_finds_queued_dead_and_stored_urls_of_the_job(
    shared_store: SharedStore, redis_url: str
) -> None:
    s = shared_store
    board = Board("--frontier", redis_url, "--job", s.docs, "--job", s.blog)
    try:
        queued = search(board, s.queued_url, s.blog)
        elsewhere = search(board, s.queued_url, s.docs)
        dead = search(board, s.broken_base + "/status/503", s.docs)
        stored = search(board, s.docs_base + "/page/2#top", s.docs)
    finally:
        board.stop()
    canonical = s.blog_base + "/page/99"  # the job's URL rules strip utm_*
    assert queued["state"] == ["queued"], queued
    assert queued["canonical URL"] == [canonical] and queued["depth"] == ["0"]
    assert queued["stored page"] == ["none"]
    assert elsewhere["state"] == ["never_seen"], elsewhere
    assert dead["state"] == ["dead"] and dead["reason"] == ["http_503"], dead
    assert dead["stored page"] == ["none (dead record: http_503)"]
    assert stored["state"] == ["stored"] and stored["stored page"] == ["HTTP 200"], stored
