"""Run a crawler in this process with a GC timer, for ``profile_stages.py`` to sample.

    python bench/stage_probe.py OUT.json crawlq crawl URL …    # the crawlq CLI, in-process
    python bench/stage_probe.py OUT.json bare URL …            # bench/bare_loop.py, in-process

Times every garbage collection (``gc.callbacks``: start to stop, per generation) and, at
exit, writes to ``OUT.json`` the collections, their total seconds, and this process's own
CPU seconds (``resource.getrusage``: user + system, every thread), so the profile can give
GC its own line (a sampler sees a collection as the Python frame that triggered it) and
convert sample shares to CPU µs. Anything else in argv goes to the crawler unchanged.
"""

from __future__ import annotations

import atexit
import gc
import json
import resource
import runpy
import sys
import time
from pathlib import Path

_BENCH = Path(__file__).resolve().parent


def main() -> None:
    out, kind, *rest = sys.argv[1:]
    started: dict[int, float] = {}
    totals = {"gc_s": 0.0, "collections": 0, "gen2": 0}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        gen = info["generation"]
        if phase == "start":
            started[gen] = time.perf_counter()
        elif gen in started:
            totals["gc_s"] += time.perf_counter() - started.pop(gen)
            totals["collections"] += 1
            totals["gen2"] += gen == 2

    def write() -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        totals["cpu_s"] = usage.ru_utime + usage.ru_stime
        Path(out).write_text(json.dumps(totals))

    gc.callbacks.append(on_gc)
    atexit.register(write)
    if kind == "crawlq":
        from crawlq.cli import main as crawlq_main

        sys.argv = ["crawlq", *rest]
        crawlq_main()
    elif kind == "bare":
        sys.argv = [str(_BENCH / "bare_loop.py"), *rest]
        runpy.run_path(sys.argv[0], run_name="__main__")
    else:
        raise SystemExit(f"unknown crawler {kind!r} (crawlq, bare)")


if __name__ == "__main__":
    main()
