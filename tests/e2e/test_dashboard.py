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
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from parsel import Selector

from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread
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
    """Run headless Chromium on ``url`` with ``args`` (``--dump-dom``, ``--screenshot=…``)."""
    proc = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", *args, url],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
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
