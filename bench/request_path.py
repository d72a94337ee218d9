"""The files one request crosses: ``crawlq crawl`` of a generated site under a profiler.

    python bench/request_path.py [--pages 100]

Runs ``crawlq crawl URL`` in this process, on the embedded default (SQLite frontier and store
in one file, robots.txt obeyed) with ``--delay 0 --concurrency 1``, against a site of
``--pages`` linked pages (`crawlq.testing.generate_site`) served from a loopback thread.
``sys.setprofile`` and ``threading.setprofile`` record every Python call (a function entered
or a coroutine resumed; module bodies run by an import are not calls) whose code lives in a
crawlq source file, and the file it lives in.

The rule that sorts the files: the server marks each page request it receives, and the time
from one page request to the next is that page's *window* (with ``--concurrency 1`` a window
holds the rest of one page's path and the start of the next one's: settle, lease, robots.txt,
fetch). A file is

- **per page** when it has a call in at least 90 % of the windows between the first page
  request and the last (the last window, which holds the shut-down, is not counted);
- **start-up** when it has a call before the first page request and is not per page;
- **other** otherwise (the shut-down and the summary, timers, what some pages need).

Files of L0 (the values and pure rules: `L0` below, the layer-0 entries of
``tests/unit/test_layers.py``), the package root and `crawlq.testing` (the server) are not
listed. Each list is in the order of the files' first calls. `tests/engine/test_request_path.py`
checks that the two lists are the ones ``docs/architecture.md`` gives in its section "One
request's path, file by file". This measures structure, not speed.
"""

from __future__ import annotations

import argparse
import contextlib
import dis
import inspect
import io
import sys
import tempfile
import threading
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

import crawlq
from crawlq.cli.terminal import reset_logging
from crawlq.testing import ServerThread, generate_site, make_static_app

SRC = Path(crawlq.__file__).resolve().parent
L0 = (
    "clock",
    "errors",
    "items",
    "records",
    "request",
    "rules",
    "secrecy",
    "settings",
    "sitemap",
    "urls",
    "web",
)
"""Top-level modules and packages of layer 0 (the same as ``tests/unit/test_layers.py``)."""
NOT_LISTED = (*L0, "__init__", "__main__", "testing")
PER_PAGE_SHARE = 0.9


@dataclass(frozen=True)
class RequestPath:
    """What one profiled crawl called, as paths relative to ``src/crawlq``.

    Attributes:
        startup: Files called before the first page and not per page.
        per_page: Files called in at least `PER_PAGE_SHARE` of the page windows.
        other: Every other file called (shut-down, timers, some pages only).
        waiting: Files not per page whose coroutines are resumed in at least
            `PER_PAGE_SHARE` of the windows: frames that await the crawl (the command, the
            crawl run), on the stack while every page runs but not called by one.
        pages: Page requests the server received.
        windows: Page windows counted (``pages - 1``).
    """

    startup: list[str]
    per_page: list[str]
    other: list[str]
    waiting: list[str]
    pages: int
    windows: int

    @property
    def total(self) -> int:
        """Files above L0 at start-up and per page together."""
        return len(self.startup) + len(self.per_page)


class _Recorder:
    """The profile hook: which files have a call in which window, and their first calls."""

    def __init__(self) -> None:
        self.pages = 0  # page requests so far: the current window
        self.first: dict[str, int] = {}  # file -> rank of its first call
        self.startup: set[str] = set()  # files called before the first page request
        self.windows: Counter[str] = Counter()  # file -> page windows with a call
        self._last: dict[str, int] = {}  # file -> last page window with a call
        self.resumed: Counter[str] = Counter()  # file -> page windows with a coroutine resumed
        self._last_resumed: dict[str, int] = {}
        self._files: dict[str, str | None] = {}  # co_filename -> listed path, or None

    def page_requested(self) -> None:
        self.pages += 1

    def _listed(self, filename: str) -> str | None:
        try:
            relative = Path(filename).resolve().relative_to(SRC)
        except ValueError:
            return None
        top = relative.parts[0].removesuffix(".py")
        return None if top in NOT_LISTED else relative.as_posix()

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event != "call" or code.co_name == "<module>":
            return
        try:
            path = self._files[code.co_filename]
        except KeyError:
            path = self._files[code.co_filename] = self._listed(code.co_filename)
        if path is None:
            return
        window = self.pages
        if self._last.get(path) == window:
            return
        if _resumed(frame):
            if self._last_resumed.get(path) != window and not _importing(frame):
                self._last_resumed[path] = window
                self.resumed[path] += window > 0
            return
        if _importing(frame):
            return
        self._last[path] = window
        self.first.setdefault(path, len(self.first))
        if window == 0:
            self.startup.add(path)
        else:
            self.windows[path] += 1

    def result(self) -> RequestPath:
        counted = max(0, self.pages - 1)  # the last window holds the shut-down: not counted
        per_page: list[str] = []
        startup: list[str] = []
        other: list[str] = []
        for path in sorted(self.first, key=self.first.__getitem__):
            calls = self.windows[path] - (self._last.get(path) == self.pages)
            if counted and calls >= PER_PAGE_SHARE * counted:
                per_page.append(path)
            elif path in self.startup:
                startup.append(path)
            else:
                other.append(path)
        waiting = [
            path
            for path, n in self.resumed.items()
            if path not in per_page
            and n - (self._last_resumed[path] == self.pages) >= PER_PAGE_SHARE * counted
        ]
        return RequestPath(startup, per_page, other, waiting, self.pages, counted)


_SUSPENDING = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_FIRST_RESUME: dict[types.CodeType, int] = {}


def _resumed(frame: types.FrameType) -> bool:
    """Whether this "call" event is a suspended coroutine resumed, not a function entered.

    A task's every resumption re-enters each coroutine of its ``await`` chain, so the
    coroutines that only wait on the request path (the command awaiting the crawl, the crawl
    awaiting its worker) would otherwise look called on every page. A fresh coroutine frame
    stands at its first ``RESUME`` instruction; a resumed one past it.
    """
    code = frame.f_code
    if not code.co_flags & _SUSPENDING:
        return False
    try:
        first = _FIRST_RESUME[code]
    except KeyError:
        first = _FIRST_RESUME[code] = next(
            (i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), 0
        )
    return frame.f_lasti > first


def _importing(frame: types.FrameType | None) -> bool:
    """Whether ``frame`` runs as part of an import (a class body, a decorator at import)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _site_app(root: Path, recorder: _Recorder) -> web.Application:
    @web.middleware
    async def mark(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path != "/robots.txt":
            recorder.page_requested()
        return await handler(request)

    app = make_static_app(root)
    app.middlewares.append(mark)
    return app


def measure(pages: int = 100) -> RequestPath:
    """Crawl a generated site of ``pages`` pages under the profiler and sort the files."""
    from crawlq.cli.app import cli

    recorder = _Recorder()
    with tempfile.TemporaryDirectory(prefix="crawlq-path-") as tmp:
        site = generate_site(Path(tmp) / "site", pages)
        with ServerThread(_site_app(site, recorder)) as server, _kept_logging():
            args = ["crawl", server.base_url + "/", "--store", str(Path(tmp) / "crawl.db")]
            args += ["--delay", "0", "--concurrency", "1", "-q"]
            before = sys.getprofile(), threading.getprofile()
            threading.setprofile(recorder)
            sys.setprofile(recorder)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    cli.main(args, prog_name="crawlq", standalone_mode=False)
            finally:
                sys.setprofile(before[0])
                threading.setprofile(before[1])  # type: ignore[arg-type]
    return recorder.result()


@contextlib.contextmanager
def _kept_logging() -> Any:
    """Undo the logging the command configures (for a caller in the same process)."""
    try:
        yield
    finally:
        reset_logging()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=100, help="pages of the generated site")
    parser.add_argument("--other", action="store_true", help="also list the other files")
    args = parser.parse_args()
    path = measure(args.pages)
    print(f"{path.pages} pages, {path.windows} page windows counted")
    print(f"start-up ({len(path.startup)} files):")
    for name in path.startup:
        print(f"  {name}")
    print(f"per page ({len(path.per_page)} files):")
    for name in path.per_page:
        print(f"  {name}")
    if args.other:
        print(f"other ({len(path.other)} files):")
        for name in path.other:
            print(f"  {name}")
    print(f"waiting, resumed on every page but not called ({len(path.waiting)} files):")
    for name in path.waiting:
        print(f"  {name}")
    print(f"total above L0: {path.total}")


if __name__ == "__main__":
    main()
