"""Which stage of a crawl a profile sample belongs to: the map `profile_stages.py` reports by.

A sample is a stack of frames, each a function and the file it is in (``crawlq/links/scan.py``,
``aiohttp/client.py``: paths as py-spy prints them, from the package down). The stage is the
one of the **innermost frame that the map knows**, scanning from the running frame outwards:
a sample in ``re`` or ``dataclasses`` called from ``crawlq/urls/`` is URL work; one in
``aiohttp`` called from ``crawlq/engine/`` is fetch. A sample with an import anywhere on its
stack is start-up. Compiled code (selectolax, lexbor, sqlite3, ``bytes.decode``) has no frame
of its own, so it counts for the Python function that called it: that is why HTML parsing is
mapped by the functions that call the parser (`parse_html`, ``Response.tree``).

**The map is by package, not by file**, so it survives files being merged or renamed inside a
package (``links/hrefs.py`` folded into ``links/scan.py`` stays link extraction). Rules are
tried in order, the first that matches a frame wins; a rule with a ``function`` matches only
frames of that function (its last dotted part), in any file under its path. To update it:

- a new crawlq package: add ``("stage", "crawlq/newpkg/", None)`` to `RULES`;
- a function moved between packages: its function rule (parse_html) still matches if its
  path fragment still covers the new place (use the package, e.g. ``crawlq/``);
- check: ``profile_stages.py`` prints the crawlq files whose samples fell to *other crawlq*
  (no rule but the catch-all ``crawlq/``), with their share: each is a file to map.

``tests/unit/test_bench_stages.py`` pins the map on example stacks.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["OTHER", "OTHER_CRAWLQ", "RULES", "STAGES", "START_UP", "WAITING", "classify"]

START_UP = "start-up (imports)"
OTHER_CRAWLQ = "other crawlq"
OTHER = "other (unmapped)"
WAITING = "waiting (not counted)"

# a running frame that only waits: a pool thread blocked on its work queue, the event loop
# in epoll_wait, a lock or condition wait. py-spy can count such a thread as active; these
# samples are left out of every stage. (path fragment, function)
IDLE_LEAVES = [
    ("concurrent/futures/thread.py", "_worker"),
    ("selectors.py", "select"),
    ("threading.py", "wait"),
    ("threading.py", "_wait_for_tstate_lock"),
    ("queue.py", "get"),
]

# (stage, path fragment, function or None): first match wins, per frame, innermost frame first
RULES: list[tuple[str, str, str | None]] = [
    # HTML parse: compiled parsers, timed at the Python functions that call them
    ("HTML parse", "crawlq/", "parse_html"),
    ("HTML parse", "crawlq/spider/", "tree"),
    ("HTML parse", "crawlq/spider/", "selector"),
    ("HTML parse", "bare_loop.py", "parse"),
    ("HTML parse", "selectolax/", None),
    ("HTML parse", "parsel/", None),
    ("HTML parse", "lxml/", None),
    ("HTML parse", "cssselect/", None),
    ("decode", "crawlq/web/decode", None),
    ("decode", "crawlq/web/codings", None),
    ("decode", "charset_normalizer/", None),
    ("decode", "encodings/", None),
    ("link extraction", "crawlq/links/", None),
    ("link extraction", "bare_loop.py", "page_links"),
    ("URL canonicalisation", "crawlq/urls/", None),
    ("URL canonicalisation", "ada_url/", None),
    ("URL canonicalisation", "w3lib/", None),
    ("URL canonicalisation", "urllib/parse.py", None),
    ("fetch", "crawlq/fetch/", None),
    ("fetch", "crawlq/web/", None),
    ("fetch", "aiohttp/", None),
    ("fetch", "yarl/", None),
    ("fetch", "multidict/", None),
    ("fetch", "aiohappyeyeballs/", None),
    ("fetch", "fetch_only.py", None),
    ("robots, scope and rules", "crawlq/robots/", None),
    ("robots, scope and rules", "crawlq/rules/", None),
    ("robots, scope and rules", "crawlq/sitemap/", None),
    ("robots, scope and rules", "protego", None),
    ("frontier", "crawlq/frontier/", None),
    ("frontier", "sqlite3/", None),
    ("store", "crawlq/store/", None),
    ("store", "crawlq/records.py", None),
    ("store", "warcio/", None),
    ("engine step/outcome/flush", "crawlq/engine/", None),
    ("engine step/outcome/flush", "crawlq/request/", None),
    ("engine step/outcome/flush", "crawlq/middleware/", None),
    ("spider and items", "crawlq/spider/", None),
    ("spider and items", "crawlq/items/", None),
    ("asyncio and threads", "asyncio/", None),
    ("asyncio and threads", "selectors.py", None),
    ("asyncio and threads", "threading.py", None),
    ("asyncio and threads", "concurrent/futures/", None),
    ("asyncio and threads", "queue.py", None),
    ("logging, CLI, settings", "logging/", None),
    ("logging, CLI, settings", "crawlq/cli/", None),
    ("logging, CLI, settings", "crawlq/settings/", None),
    ("logging, CLI, settings", "click/", None),
    ("logging, CLI, settings", "rich/", None),
    (OTHER_CRAWLQ, "crawlq/", None),
    ("link extraction", "bare_loop.py", None),  # the bare loop's worker: its dedup and queue
]

# every stage in report order; GC is measured apart (gc.callbacks), see profile_stages.py
STAGES = [
    "fetch",
    "link extraction",
    "HTML parse",
    "decode",
    "URL canonicalisation",
    "robots, scope and rules",
    "frontier",
    "store",
    "engine step/outcome/flush",
    "spider and items",
    "asyncio and threads",
    "logging, CLI, settings",
    OTHER_CRAWLQ,
    START_UP,
    OTHER,
]


def _frame_stage(function: str, path: str) -> str | None:
    name = function.rsplit(".", 1)[-1]
    for stage, fragment, wanted in RULES:
        if fragment in path and (wanted is None or name == wanted):
            return stage
    return None


def classify(frames: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """The stage of one sample, and the file that decided it (for `OTHER`: the running one).

    Args:
        frames: (function, file path) pairs, outermost first (py-spy's order).

    Returns:
        (stage, path): one of `STAGES` (or `WAITING` for a thread that only waits), and the
        file of the frame that decided it.
    """
    if frames:
        leaf_function, leaf_path = frames[-1]
        leaf_name = leaf_function.rsplit(".", 1)[-1]
        if any(f in leaf_path and leaf_name == n for f, n in IDLE_LEAVES):
            return WAITING, leaf_path
    for _function, path in frames:
        if path.startswith(("<frozen importlib", "importlib/")):
            return START_UP, path
    for function, path in reversed(frames):
        stage = _frame_stage(function, path)
        if stage is not None:
            return stage, path
    return OTHER, frames[-1][1] if frames else ""
