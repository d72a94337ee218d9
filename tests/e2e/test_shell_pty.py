"""``crawlq shell URL`` typed at through a pseudo-terminal (pexpect), as a person would.

The shell runs with a downloader middleware of its own (``--downloader-middleware``): the
fault server's log shows its header on both pages the shell fetched, so the shell goes
through the crawl's fetch path, middlewares included.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from crawlq.testing import RequestLog, make_fault_app
from crawlq.testing.thread import ServerThread

pytestmark = pytest.mark.e2e

PROMPT = r"In \[\d+\]: " if importlib.util.find_spec("IPython") else ">>> "

MIDDLEWARE = """
import dataclasses


class Tag:
    def process_request(self, request):
        return dataclasses.replace(request, headers={**request.headers, "X-Shell": "pty"})
"""


@pytest.fixture
def fault() -> Iterator[tuple[str, RequestLog]]:
    log = RequestLog()
    with ServerThread(make_fault_app(log)) as server:
        yield server.base_url, log


def test_shell_answers_what_is_typed_at_its_prompt(
    fault: tuple[str, RequestLog], tmp_path: Path
) -> None:
    base, log = fault
    code = tmp_path / "shell_mw.py"
    code.write_text(MIDDLEWARE)
    args = ["-m", "crawlq", "shell", f"{base}/page/3", "--downloader-middleware", f"{code}:Tag"]
    shell = pexpect.spawn(
        sys.executable,
        args,
        env={**os.environ, "TERM": "dumb"},
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 200),
    )
    try:
        shell.expect_exact("crawlq shell: response, request")
        shell.expect(PROMPT)
        shell.sendline("response.status")
        shell.expect(r"\r\n200\r\n")
        shell.expect(PROMPT)
        shell.sendline("response.css('title::text').get()")
        shell.expect_exact("'Page 3'")
        shell.expect(PROMPT)
        shell.sendline(f"fetch({base + '/page/7'!r}).css('title::text').get()")
        shell.expect_exact("'Page 7'")
        shell.expect(PROMPT)
        shell.sendline("response.url")  # fetch() rebinds response
        shell.expect_exact(f"'{base}/page/7'")
        shell.expect(PROMPT)
        shell.sendline("exit()")
        shell.expect(pexpect.EOF)
    finally:
        shell.close(force=True)
    assert shell.exitstatus == 0
    assert log.headers("X-Shell", "/page/3") == ["pty"]
    assert log.headers("X-Shell", "/page/7") == ["pty"]
