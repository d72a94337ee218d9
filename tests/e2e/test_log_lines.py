"""Logs for servers: progress lines off a terminal, ``--log-format json``, the fetch line.

No test here looks at the spacing of lines in time (a shared machine): they count lines
and check their shape. The crawls are paced by politeness (``--delay``), which bounds how
short they can be from below, so that several lines are due.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq

pytestmark = pytest.mark.e2e

PAGES = 150
DELAY = "0.008"  # 150 requests to one host start at least 1.2 s apart in all


@pytest.fixture(scope="module")
def seed(site_root: Path):
    with ServerThread(make_static_app(site_root)) as server:
        yield server.base_url + "/index.html"


def crawl(seed: str, store: Path, *args: str) -> list[str]:
    proc = run_crawlq(
        "crawl", seed, "--store", str(store), "--delay", DELAY, "--max-pages", str(PAGES), *args
    )
    assert f"pages stored: {PAGES} this run" in proc.stdout
    return proc.stderr.splitlines()


def test_progress_lines_appear_every_interval_as_text(seed: str, tmp_path: Path) -> None:
    lines = crawl(seed, tmp_path / "s.db", "--log-interval", "0.1")
    shape = re.compile(
        r"^\S+ \S+ INFO crawlq\.progress: pages (\d+) \(\d+\.\d/s\), queued \d+, "
        r"in flight \d+, retrying \d+, errors \d+, spider errors \d+$"
    )
    progress = [shape.match(line) for line in lines if "crawlq.progress" in line]
    assert len(progress) >= 3, lines
    assert all(progress), lines
    pages = [int(m.group(1)) for m in progress if m]
    assert pages == sorted(pages) and pages[-1] <= PAGES


def test_json_lines_parse_and_carry_fields(seed: str, tmp_path: Path) -> None:
    lines = crawl(seed, tmp_path / "s.db", "--log-interval", "0.1", "--log-format", "json", "-v")
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    progress = [r for r in records if r["logger"] == "crawlq.progress"]
    assert len(progress) >= 3
    for r in progress:
        assert r["level"] == "INFO" and r["time"].endswith("Z")
        assert set(r) >= {
            "pages", "pages_per_s", "queued", "in_flight", "delayed", "errors", "spider_errors"
        }  # fmt: skip
        assert r["message"].startswith(f"pages {r['pages']} (")
    fetches = [r for r in records if r["logger"] == "crawlq.engine.step" and "status" in r]
    # one line per fetch (robots.txt goes through its own cache, not this line)
    assert len(fetches) == PAGES
    for r in fetches:
        assert r["method"] == "GET" and r["url"].startswith(seed.rsplit("/", 1)[0])
        assert r["status"] == 200 and r["bytes"] > 0 and r["attempt"] == 1
        assert r["message"] == (f"GET {r['url']} 200 {r['bytes']}B {r['seconds']:.3f}s attempt=1")


def test_quiet_has_no_progress_lines(seed: str, tmp_path: Path) -> None:
    lines = crawl(seed, tmp_path / "s.db", "--log-interval", "0.1", "-q")
    assert [line for line in lines if "crawlq.progress" in line] == []


def test_json_lines_stay_json_when_a_crawl_is_stopped(seed: str, tmp_path: Path) -> None:
    """The Ctrl-C line is a log record too, not plain text in a JSON stream (QA)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "crawlq",
            "crawl", seed, "--store", str(tmp_path / "s.db"), "--delay", "0.5",
            "--log-interval", "0.1", "--log-format", "json",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        lines = []
        for line in proc.stderr:  # the first progress line with a page: the crawl is under way
            lines.append(line)
            if '"crawlq.progress"' in line and json.loads(line)["pages"] >= 1:
                break
        proc.send_signal(signal.SIGINT)
        stdout, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1 and "crawl interrupted" in stdout
    records = [json.loads(line) for line in lines + rest.splitlines()]  # all of them JSON
    stops = [r for r in records if r["message"].startswith("stopping:")]
    assert [r["message"] for r in stops] == [
        "stopping: finishing in-flight requests (Ctrl-C again to abandon them)"
    ]


_LOGGING_SPIDER = """
from crawlq.spider import Spider


class Chatty(Spider):
    name = "chatty"

    def parse(self, response):
        self.logger.info("parsed %s", response.url)
        self.logger.warning("odd page at http://user:hunter2@127.0.0.1/x")
        return []

    def closed(self, reason):
        self.logger.info("closed: %s", reason)
"""


@pytest.fixture
def chatty(tmp_path: Path) -> str:
    path = tmp_path / "chatty.py"
    path.write_text(_LOGGING_SPIDER)
    return f"{path}:Chatty"


def _spider_crawl(seed: str, store: Path, spider: str, *args: str) -> list[str]:
    proc = run_crawlq("crawl", seed, "--store", str(store), "--spider", spider, *args)
    assert "pages stored: 1 this run" in proc.stdout, proc.stderr
    return proc.stderr.splitlines()


def test_a_spiders_own_logger_logs_in_the_crawls_json_format(
    seed: str, tmp_path: Path, chatty: str
) -> None:
    lines = _spider_crawl(seed, tmp_path / "s.db", chatty, "--log-format", "json", "-v")
    records = [json.loads(line) for line in lines]  # the spider's lines are JSON too
    mine = [r for r in records if r["logger"] == "chatty"]
    messages = [r["message"] for r in mine]
    assert f"parsed {seed}" in messages
    assert "closed: finished" in messages
    warning = next(r for r in mine if r["level"] == "WARNING")
    assert "hunter2" not in warning["message"] and "127.0.0.1/x" in warning["message"]


def test_a_spiders_own_logger_follows_the_crawls_verbosity_as_text(
    seed: str, tmp_path: Path, chatty: str
) -> None:
    quiet = _spider_crawl(seed, tmp_path / "a.db", chatty)  # default: warnings only
    spider_lines = [line for line in quiet if " chatty: " in line]
    assert len(spider_lines) == 1, quiet
    assert re.match(r"^\S+ \S+ WARNING chatty: odd page at ", spider_lines[0]), quiet
    assert "hunter2" not in "\n".join(quiet)
    loud = _spider_crawl(seed, tmp_path / "b.db", chatty, "-v")
    assert any(re.match(r"^\S+ \S+ INFO chatty: parsed ", line) for line in loud), loud
    assert any(line.endswith("INFO chatty: closed: finished") for line in loud), loud
