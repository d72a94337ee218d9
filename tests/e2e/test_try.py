"""Try before you crawl: ``crawlq fetch``, ``crawlq parse`` and ``crawlq shell``.

Every command runs as a subprocess against loopback servers; their request logs say which
requests were sent.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.testing import RequestLog, ServerThread, make_fault_app, make_static_app
from tests.conftest import REPO, corpus_tarball, run_crawlq
from tests.services import need_service

PG_SPIDER = str(REPO / "examples" / "pg_docs_spider.py") + ":PgDocsSpider"


@pytest.fixture(scope="module")
def fault_log() -> RequestLog:
    return RequestLog()


@pytest.fixture(scope="module")
def fault(fault_log: RequestLog) -> Iterator[str]:
    with ServerThread(make_fault_app(fault_log)) as server:
        yield server.base_url


def _paths(log: RequestLog) -> list[str]:
    return [r.path for r in log.requests()]


# -- crawlq fetch ----------------------------------------------------------------------------


def test_fetch_prints_the_body(fault: str, fault_log: RequestLog, tmp_path: Path) -> None:
    fault_log.clear()
    proc = run_crawlq("fetch", f"{fault}/page/1", cwd=tmp_path)
    assert proc.stdout.startswith("<!DOCTYPE html>")
    assert "<title>Page 1</title>" in proc.stdout
    assert proc.stderr == ""
    assert _paths(fault_log) == ["/robots.txt", "/page/1"]
    assert list(tmp_path.iterdir()) == []  # no store, no frontier file


def test_fetch_include_prints_every_hop_of_a_redirect_chain(
    fault: str, fault_log: RequestLog
) -> None:
    fault_log.clear()
    out = run_crawlq("fetch", "-i", f"{fault}/redirect/2").stdout
    heads, _, body = out.partition("\n\n<!DOCTYPE")
    blocks = heads.split("\n\n")
    assert [b.splitlines()[:2] for b in blocks] == [
        [f"GET {fault}/redirect/2", "HTTP 302 Found"],
        [f"GET {fault}/redirect/1", "HTTP 302 Found"],
        [f"GET {fault}/redirect/0", "HTTP 200 OK"],
    ]
    assert "location: /redirect/1" in blocks[0].splitlines()
    assert "content-type: text/html; charset=utf-8" in blocks[2].splitlines()
    assert "<title>Redirect target</title>" in body
    assert _paths(fault_log) == ["/robots.txt", "/redirect/2", "/redirect/1", "/redirect/0"]


def test_fetch_json_is_one_object(fault: str) -> None:
    doc = json.loads(run_crawlq("fetch", "--json", f"{fault}/redirect/1").stdout)
    assert doc["url"] == f"{fault}/redirect/1"
    assert doc["final_url"] == f"{fault}/redirect/0"
    assert doc["redirects"] == [f"{fault}/redirect/1"]
    assert (doc["status"], doc["encoding"]) == (200, "utf-8")
    assert doc["headers"]["content-type"] == "text/html; charset=utf-8"
    assert "<title>Redirect target</title>" in doc["text"]
    assert "body_base64" not in doc


def test_fetch_json_gives_a_binary_body_in_base64(fault: str) -> None:
    doc = json.loads(run_crawlq("fetch", "--json", f"{fault}/binary").stdout)
    assert "text" not in doc
    assert doc["headers"]["content-type"] == "image/png"
    assert base64.b64decode(doc["body_base64"]).startswith(b"\x89PNG")


def test_fetch_sends_the_user_agent(fault: str) -> None:
    echoed = json.loads(run_crawlq("fetch", "--user-agent", "trybot/2.0", f"{fault}/echo").stdout)
    assert echoed["headers"]["user-agent"] == "trybot/2.0"


def test_fetch_refuses_what_robots_txt_forbids(fault: str, fault_log: RequestLog) -> None:
    fault_log.clear()
    proc = run_crawlq("fetch", f"{fault}/private/secret", check=False)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"crawlq: cannot fetch {fault}/private/secret: robots_txt: robots.txt forbids "
        f"{fault}/private/secret (--ignore-robots to fetch it anyway)"
    ]
    assert _paths(fault_log) == ["/robots.txt"]  # the page itself was never requested

    fault_log.clear()
    proc = run_crawlq("fetch", "--ignore-robots", f"{fault}/private/secret", check=False)
    assert proc.returncode == 0  # a 404 answer is still an answer: printed
    assert _paths(fault_log) == ["/private/secret"]


def test_fetch_refuses_a_redirect_to_a_private_non_seed_host(tmp_path: Path) -> None:
    (tmp_path / "b.html").write_text("<title>b</title>")
    log2 = RequestLog()
    log1 = RequestLog()
    with (
        ServerThread(make_static_app(tmp_path, log=log2), host="127.0.0.2") as two,
        ServerThread(make_fault_app(log1), host="127.0.0.1") as one,
    ):
        url = f"{one.base_url}/redirect-to?url={two.base_url}/b.html"
        proc = run_crawlq("fetch", url, check=False)
        assert proc.returncode == 1
        assert proc.stderr.startswith(
            f"crawlq: cannot fetch {two.base_url}/b.html: private_address"
        )
        assert "--allow-private" in proc.stderr
        assert log2.requests() == []
        assert [r.path for r in log1.requests()] == ["/robots.txt", "/redirect-to"]

        proc = run_crawlq("fetch", "--allow-private", url)
        assert proc.stdout == "<title>b</title>"
        assert [r.path for r in log2.requests()] == ["/robots.txt", "/b.html"]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/status/503", "http_503"),
        ("/redirect-loop/a", "redirect_loop"),
        ("/redirect/12", "too_many_redirects"),
    ],
)
def test_fetch_failures_are_one_line_and_exit_1(fault: str, path: str, says: str) -> None:
    proc = run_crawlq("fetch", f"{fault}{path}", check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"crawlq: cannot fetch {fault}/")
    assert f": {says}" in lines[0]
    assert lines[0].count(says) == 1  # the reason is said once


def test_fetch_of_a_bad_url_exits_2_naming_it() -> None:
    proc = run_crawlq("fetch", "ftp://x", check=False)
    assert proc.returncode == 2
    assert "'ftp://x'" in proc.stderr and "URL" in proc.stderr


# -- crawlq parse ----------------------------------------------------------------------------

_COMMAND_PAGE = """<html><head><title>DEMO</title></head><body>
<div class="refentry"><div class="refnamediv"><h2>DEMO</h2>
<p>DEMO, DEMOS \N{EM DASH} show a demo</p></div>
<div class="refsynopsisdiv"><pre class="synopsis">DEMO [ WORK ]</pre></div></div>
<a href="sql-select.html">select</a> <a href="index.html">home</a>
<a href="http://example.org/away.html">elsewhere</a>
</body></html>"""


@pytest.fixture
def demo_site(tmp_path: Path) -> Iterator[tuple[str, RequestLog]]:
    root = tmp_path / "site"
    root.mkdir()
    (root / "sql-demo.html").write_text(_COMMAND_PAGE, encoding="utf-8")
    log = RequestLog()
    with ServerThread(make_static_app(root, log=log)) as server:
        yield server.base_url, log


def test_parse_prints_the_items_and_requests_of_one_callback(
    demo_site: tuple[str, RequestLog], tmp_path: Path
) -> None:
    base, log = demo_site
    work = tmp_path / "work"
    work.mkdir()
    proc = run_crawlq(
        "parse",
        f"{base}/sql-demo.html",
        "--spider",
        PG_SPIDER,
        "--callback",
        "parse_command",
        cwd=work,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines == [
        {
            "item": {
                "command": "DEMO",
                "names": ["DEMO", "DEMOS"],
                "purpose": "show a demo",
                "synopsis": "DEMO [ WORK ]",
                "url": f"{base}/sql-demo.html",
            }
        },
        {
            "request": {
                "url": f"{base}/sql-select.html",
                "callback": "parse_command",
                "priority": -1,
            }
        },
        {"request": {"url": f"{base}/index.html", "callback": "parse", "priority": -1}},
    ]
    assert "requests not followed by a crawl: offsite: 1" in proc.stderr
    assert [r.path for r in log.requests()] == ["/robots.txt", "/sql-demo.html"]
    assert list(work.iterdir()) == []  # no store, nothing queued anywhere


def test_parse_on_the_real_manual_page(tmp_path: Path, site_root: Path) -> None:
    if corpus_tarball() is None:
        need_service("needs the PostgreSQL manual corpus (sql-abort.html)")
    with ServerThread(make_static_app(site_root)) as server:
        base = server.base_url
        proc = run_crawlq(
            "parse",
            f"{base}/sql-abort.html",
            "--spider",
            PG_SPIDER,
            "--callback",
            "parse_command",
            "--meta",
            '{"from": "test"}',
            cwd=tmp_path,
        )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    items = [line["item"] for line in lines if "item" in line]
    assert [(i["command"], i["purpose"]) for i in items] == [
        ("ABORT", "abort the current transaction")
    ]
    requests = [line["request"] for line in lines if "request" in line]
    home = {"url": f"{base}/index.html", "callback": "parse", "priority": -1}
    assert home in requests
    assert all(r["url"].startswith(base) for r in requests)
    assert list(tmp_path.iterdir()) == []


def test_parse_default_spider_yields_the_page_links(demo_site: tuple[str, RequestLog]) -> None:
    base, _ = demo_site
    proc = run_crawlq("parse", f"{base}/sql-demo.html")
    urls = [json.loads(line)["request"]["url"] for line in proc.stdout.splitlines()]
    assert urls == [f"{base}/sql-select.html", f"{base}/index.html"]


def test_parse_spider_error_is_one_line_and_its_traceback(
    demo_site: tuple[str, RequestLog], tmp_path: Path
) -> None:
    base, _ = demo_site
    spider = tmp_path / "broken.py"
    spider.write_text(
        "from crawlq.spider import Spider\n"
        "class Broken(Spider):\n"
        "    name = 'broken'\n"
        "    def parse(self, response):\n"
        "        yield {'ok': 1}\n"
        "        raise KeyError('no such field')\n"
    )
    proc = run_crawlq("parse", f"{base}/sql-demo.html", "--spider", f"{spider}:Broken", check=False)
    assert proc.returncode == 1
    assert "crawlq: spider_error: KeyError: callback 'parse'" in proc.stderr
    assert f"(on {base}/sql-demo.html)" in proc.stderr
    assert "Traceback (most recent call last)" in proc.stderr
    assert "raise KeyError('no such field')" in proc.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--callback", "nope"], "PgDocsSpider has no method 'nope'"),
        (["--meta", "[1]"], "--meta"),
        (["--meta", "{"], "not JSON"),
    ],
)
def test_parse_bad_options_exit_2_naming_them(
    demo_site: tuple[str, RequestLog], args: list[str], says: str
) -> None:
    base, log = demo_site
    proc = run_crawlq("parse", f"{base}/x.html", "--spider", PG_SPIDER, *args, check=False)
    assert proc.returncode == 2
    assert says in proc.stderr
    assert log.requests() == []


# -- crawlq shell ----------------------------------------------------------------------------


def test_shell_runs_piped_code_against_the_fetched_page(
    fault: str, fault_log: RequestLog, tmp_path: Path
) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.py"
    browser.write_text(
        f"import sys\nopen({str(opened)!r}, 'w').write(sys.argv[1])\n", encoding="utf-8"
    )
    code = "\n".join(
        [
            "print(response.css('title::text').get())",
            "print(request.url, spider.name)",
            f"fetch({fault + '/page/2'!r})",
            "print(response.status, response.url)",
            "print('viewed', view(response))",
        ]
    )
    fault_log.clear()
    proc = subprocess.run(
        [sys.executable, "-m", "crawlq", "shell", f"{fault}/page/1"],
        input=code,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "BROWSER": f"{sys.executable} {browser} %s"},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["Page 1", f"{fault}/page/1 default", f"200 {fault}/page/2"]
    viewed = Path(lines[-1].removeprefix("viewed "))
    try:
        assert lines[3] == str(viewed)  # view() prints the path of the body's file
        assert "<title>Page 2</title>" in viewed.read_text(encoding="utf-8")
        assert opened.read_text(encoding="utf-8") == f"file://{viewed}"
    finally:
        viewed.unlink()
    assert _paths(fault_log) == ["/robots.txt", "/page/1", "/robots.txt", "/page/2"]


def test_shell_piped_code_that_raises_exits_1_with_its_traceback(fault: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "crawlq", "shell", f"{fault}/page/1"],
        input="print(response.status)\nresponse.no_such_thing\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stdout == "200\n"
    assert "Traceback" in proc.stderr and "no_such_thing" in proc.stderr


def test_shell_on_a_forbidden_url_says_why_and_exits_1(fault: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "crawlq", "shell", f"{fault}/private/x"],
        input="print('ran')\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "robots_txt: robots.txt forbids" in proc.stderr


PROMPT = b"In [" if importlib.util.find_spec("IPython") else b">>> "
"""The shell's prompt: IPython's when it is installed (not in the test extras), else Python's."""


def _read_until(
    fd: int, wanted: bytes, seen: bytearray, *, after: int = 0, deadline_s: float = 60.0
) -> None:
    """Read the terminal's output into ``seen`` until it holds ``wanted`` past ``after``."""
    end = time.monotonic() + deadline_s
    while wanted not in seen[after:]:
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {wanted!r} on the terminal; it showed:\n{seen.decode()}")
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the shell closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"terminal closed before {wanted!r}:\n{seen.decode()}")
            seen += chunk


def test_shell_on_a_terminal_evaluates_a_selector(fault: str) -> None:
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "crawlq", "shell", f"{fault}/page/3"],
        stdin=child,
        stdout=child,
        stderr=child,
        close_fds=True,
        env={**os.environ, "TERM": "dumb"},
    )
    os.close(child)
    seen = bytearray()
    try:
        # Each line is written once the shell prompts for it.
        _read_until(main, b"crawlq shell: response, request", seen)
        _read_until(main, PROMPT, seen)
        os.write(main, b"response.css('title::text').get()\n")
        _read_until(main, b"'Page 3'", seen)
        _read_until(main, PROMPT, seen, after=seen.index(b"'Page 3'"))
        os.write(main, b"fetch(" + repr(f"{fault}/page/4").encode() + b").status\n")
        _read_until(main, b"\n200\r\n", seen)
        _read_until(main, PROMPT, seen, after=seen.index(b"\n200\r\n"))
        os.write(main, b"\x04")  # Ctrl-D: end of input
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        os.close(main)
