"""The stage map of ``bench/profile_stages.py`` (``bench/_stages.py``) on example stacks.

Stacks are (function, file) pairs, outermost first, as py-spy prints them. Nothing is timed.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.conftest import REPO


def _stages() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_stages", REPO / "bench" / "_stages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOOP = [("run", "asyncio/runners.py"), ("BaseEventLoop._run_once", "asyncio/base_events.py")]


def test_the_innermost_mapped_frame_decides() -> None:
    s = _stages()
    step = [*LOOP, ("process", "crawlq/engine/step.py")]
    assert s.classify([*step, ("Fetcher.fetch", "crawlq/fetch/fetcher.py")])[0] == "fetch"
    assert s.classify([*step, ("ClientSession._request", "aiohttp/client.py")])[0] == "fetch"
    # stdlib helpers without a rule count for their caller
    urls = [*step, ("canonicalize", "crawlq/urls/canonical.py"), ("_compile", "re/__init__.py")]
    assert s.classify(urls) == ("URL canonicalisation", "crawlq/urls/canonical.py")
    assert s.classify([*step, ("dataclass", "dataclasses.py")])[0] == "engine step/outcome/flush"
    assert s.classify(LOOP)[0] == "asyncio and threads"


def test_packages_not_files_so_merged_modules_keep_their_stage() -> None:
    s = _stages()
    for path in ("crawlq/links/hrefs.py", "crawlq/links/scan.py", "crawlq/links/new_name.py"):
        assert s.classify([*LOOP, ("links", path)])[0] == "link extraction"
    # the parser's caller decides HTML parse wherever parse_html lives
    for path in ("crawlq/links/scan.py", "crawlq/html/tree.py"):
        assert s.classify([*LOOP, ("parse_html", path)])[0] == "HTML parse"
    assert s.classify([("queue", "crawlq/frontier/queue.py")])[0] == "frontier"
    assert s.classify([("x", "crawlq/web/decode.py")])[0] == "decode"
    assert s.classify([("x", "crawlq/web/headers.py")])[0] == "fetch"
    assert s.classify([("x", "crawlq/brand_new.py")]) == (s.OTHER_CRAWLQ, "crawlq/brand_new.py")
    assert s.classify([("x", "somewhere/else.py")])[0] == s.OTHER


def test_imports_anywhere_are_start_up_and_waits_are_left_out() -> None:
    s = _stages()
    imp = [("main", "crawlq/cli/app.py"), ("_find_and_load", "<frozen importlib._bootstrap>")]
    assert s.classify([*imp, ("<module>", "aiohttp/client.py")])[0] == s.START_UP
    assert s.classify([*LOOP, ("EpollSelector.select", "selectors.py")])[0] == s.WAITING
    pool = [("Thread.run", "threading.py"), ("_worker", "concurrent/futures/thread.py")]
    assert s.classify(pool)[0] == s.WAITING
    assert s.classify([*pool, ("step", "crawlq/frontier/sqlite/queue.py")])[0] == "frontier"


def test_the_bare_loop_has_its_stages() -> None:
    s = _stages()
    worker = [*LOOP, ("crawl.<locals>.worker", "bare_loop.py")]
    assert s.classify([*worker, ("parse", "bare_loop.py")])[0] == "HTML parse"
    assert s.classify([*worker, ("page_links", "bare_loop.py")])[0] == "link extraction"
    assert s.classify(worker)[0] == "link extraction"


def test_every_stage_a_rule_names_is_reported() -> None:
    s = _stages()
    assert {stage for stage, _, _ in s.RULES} <= set(s.STAGES)
