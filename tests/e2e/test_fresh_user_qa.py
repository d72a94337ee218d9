"""What a Scrapy user tripped over on a first run from the README (issue 22's QA findings).

Every command runs as a subprocess against the loopback fault server (``/echo`` answers with
the method, headers and body it got); each test failed on the code before its fix.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from crawlq.request import CrawlRequest
from crawlq.spider import Spider
from crawlq.testing import RequestLog, ServerThread, make_fault_app
from tests.conftest import run_crawlq

pytestmark = pytest.mark.e2e

SPIDERS = """
import json

from crawlq.spider import Spider, CrawlRequest


class HeaderSpider(Spider):
    name = "headers"

    def start_requests(self):
        for url in self.start_urls:
            yield CrawlRequest(url, headers={"X-Test": "one"}, callback=self.parse_echo)

    def parse_echo(self, response):
        yield {"x_test": json.loads(response.text)["headers"].get("x-test")}


class BrokenInit(Spider):
    def __init__(self):
        super().__init__()
        raise RuntimeError("no API key")


class BrokenStart(Spider):
    start_urls = ["http://127.0.0.1:1/"]

    def start_requests(self):
        raise KeyError("cursor")
        yield


class Poster(Spider):
    def parse(self, response):
        yield CrawlRequest(
            response.urljoin("/echo"), method="POST", body=b"a=1",
            headers={"X-Form": "1"}, callback="parse",
        )
"""


@pytest.fixture(scope="module")
def fault_log() -> RequestLog:
    return RequestLog()


@pytest.fixture(scope="module")
def fault(fault_log: RequestLog) -> Iterator[str]:
    with ServerThread(make_fault_app(fault_log)) as server:
        yield server.base_url


@pytest.fixture
def spiders(tmp_path: Path) -> str:
    path = tmp_path / "qa_spiders.py"
    path.write_text(SPIDERS)
    return str(path)


def test_a_bound_method_callback_is_stored_by_its_name() -> None:
    class S(Spider):
        def parse_item(self, response: object) -> None:
            pass

    spider = S()
    request = CrawlRequest("http://h.test/", callback=spider.parse_item)  # type: ignore[arg-type]
    assert request.callback == "parse_item"
    assert CrawlRequest("http://h.test/", errback=spider.parse_item).errback == "parse_item"  # type: ignore[arg-type]
    assert CrawlRequest.from_json(request.to_json()).callback == "parse_item"
    with pytest.raises(ValueError, match="callback must be a spider method"):
        CrawlRequest("http://h.test/", callback=print)  # type: ignore[arg-type]


def test_scrapy_start_requests_with_callback_self_parse_crawls(
    fault: str, spiders: str, tmp_path: Path
) -> None:
    out = tmp_path / "items.jsonl"
    proc = run_crawlq(
        "crawl", f"{fault}/echo", "--spider", f"{spiders}:HeaderSpider", "--store",
        str(tmp_path / "c.db"), "--max-depth", "0", "-o", str(out), "-q", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["x_test"] for line in out.read_text().splitlines()] == ["one"]


@pytest.mark.parametrize(
    ("spider", "says"),
    [
        ("BrokenInit", "--spider: BrokenInit() raised RuntimeError: no API key"),
        ("BrokenStart", "--spider: BrokenStart.start_requests raised KeyError: 'cursor'"),
    ],
)
def test_a_spider_that_raises_before_crawling_is_one_line_and_exit_2(
    spiders: str, tmp_path: Path, spider: str, says: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = run_crawlq("crawl", "--spider", f"{spiders}:{spider}", cwd=work, check=False)
    assert proc.returncode == 2
    assert f"Error: {says} (setting spider)" in proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr
    assert list(work.iterdir()) == []  # no store, no lock
    shown = run_crawlq("shell", "--spider", f"{spiders}:{spider}", cwd=work, check=False)
    if spider == "BrokenInit":  # parse and shell make the spider too
        assert shown.returncode == 2
        assert f"Error: {says} (setting spider)" in shown.stderr.splitlines()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--downloader-middleware", "qa_spiders.py:Nope"],
            "Error: --downloader-middleware: 'qa_spiders.py:Nope': 'qa_spiders.py' has no "
            "attribute 'Nope' (setting downloader_middlewares)",
        ),
        (
            ["--items-table", "t1"],
            "Error: --items-table t1 needs a PostgreSQL store (--store postgresql://…) "
            "(setting items_table)",
        ),
        (
            ["--pipeline", "qa_spiders.py:Nope"],
            "Error: --pipeline: 'qa_spiders.py:Nope': 'qa_spiders.py' has no "
            "attribute 'Nope' (setting item_pipelines)",
        ),
        (["--output-what", "pages"], "Error: --output-what pages needs -o FILE or -O FILE"),
    ],
)
def test_rejected_crawl_options_leave_no_store_behind(
    spiders: str, tmp_path: Path, args: list[str], says: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "qa_spiders.py").write_text(SPIDERS)
    cmd = ["crawl", "http://127.0.0.1:1/x", "--store", "m4.db", *args]
    proc = run_crawlq(*cmd, cwd=work, check=False)
    assert proc.returncode == 2
    assert says in proc.stderr.splitlines(), proc.stderr
    assert sorted(p.name for p in work.iterdir()) == ["qa_spiders.py"]


def test_fetch_parse_and_shell_send_header_options(fault: str, spiders: str) -> None:
    url = f"{fault}/echo"
    fetched = run_crawlq("fetch", "--header", "X-Test: one", "--header", "X-B: 2", url)
    assert json.loads(fetched.stdout)["headers"]["x-test"] == "one"
    assert json.loads(fetched.stdout)["headers"]["x-b"] == "2"
    bad = run_crawlq("parse", "--header", "Host: x", url, check=False)
    assert bad.returncode == 2 and "--header: header Host may not be set" in bad.stderr
    shell = subprocess.run(
        [sys.executable, "-m", "crawlq", "shell", "--header", "X-Test: one", url],
        input="import json\nprint(json.loads(response.text)['headers']['x-test'])\n",
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (shell.returncode, shell.stdout) == (0, "one\n"), shell.stderr


def test_shell_fetch_takes_a_request(fault: str) -> None:
    code = (
        "from crawlq.request import CrawlRequest\n"
        f"r = fetch(CrawlRequest.form({fault + '/echo'!r}, {{'user': 'me'}}))\n"
        "import json\n"
        "echo = json.loads(r.text)\n"
        "print(echo['method'], echo['body'])\n"
        "fetch({'url': 1})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "crawlq", "shell"],
        input=code, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.stdout == "POST user=me\n", proc.stderr
    assert proc.returncode == 1
    assert "TypeError: fetch() takes a URL or a CrawlRequest, got dict" in proc.stderr
    assert "_run_piped" not in proc.stderr  # the frames from the user's code on, not crawlq's exec


def test_parse_shows_the_method_body_and_header_names_of_a_request(
    fault: str, spiders: str
) -> None:
    proc = run_crawlq("parse", f"{fault}/page/1", "--spider", f"{spiders}:Poster")
    requests = [json.loads(line)["request"] for line in proc.stdout.splitlines()]
    assert requests == [
        {
            "url": f"{fault}/echo",
            "callback": "parse",
            "priority": -1,  # depth 1 below the page, as follow() gives
            "method": "POST",
            "body_bytes": 3,
            "headers": ["X-Form"],
        }
    ]


def test_a_failure_line_names_its_reason_once() -> None:
    proc = run_crawlq("fetch", "http://127.0.0.1:1/x", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("crawlq: cannot fetch http://127.0.0.1:1/x: robots_unreachable")
    assert proc.stderr.count("robots_unreachable") == 1, proc.stderr


def test_crawl_usage_shows_seeds_are_optional() -> None:
    assert "crawl [OPTIONS] [SEED_URL]...\n" in run_crawlq("crawl", "--help").stdout


@pytest.mark.skipif(
    importlib.util.find_spec("IPython") is not None, reason="IPython's shell is not code's"
)
def test_an_error_at_the_standard_shell_prompt_shows_only_the_users_error(fault: str) -> None:
    shell = pexpect.spawn(
        sys.executable, ["-m", "crawlq", "shell", f"{fault}/page/1"],
        env={**os.environ, "TERM": "dumb"}, encoding="utf-8", timeout=60,
    )  # fmt: skip
    try:
        shell.expect(">>> ")
        shell.sendline("1/0")
        shell.expect(">>> ")
        shown = shell.before
        shell.sendline("exit()")
        shell.expect(pexpect.EOF)
    finally:
        shell.close(force=True)
    assert "ZeroDivisionError: division by zero" in shown
    assert "IPython" not in shown and "During handling" not in shown, shown
