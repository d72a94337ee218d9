"""An embedded crawl on one process against several (issue 25, goal 3), rows in alternation.

    python bench/local_processes.py --rounds 5 [--synthetic 20000 --hosts 8]

Serves the PostgreSQL manual (or ``--synthetic N`` pages on ``--hosts`` loopback hosts) with
nginx, then runs, round after round (A B C, A B C, ...), ``crawlq crawl URL --delay 0
--concurrency 16 --host-concurrency 16 --store <fresh>`` with:

* ``P=1``: ``--processes 1`` (today's mode, one process);
* ``P=2``: ``--processes 2`` (the owner works and serves one worker process);
* ``P=2 serve``: the owner stops its own worker once it starts two worker processes
  (`crawlq.engine.local_crawl.LocalProcessesCrawl` with ``owner_works=False``, run through the
  Python API: the CLI has no option for it).

Each row: pages stored (and distinct URLs, which must be equal), wall s, pages/s, CPU s of the
whole process tree and CPU µs per page, and the machine's other load (cores busy with other
work during the run). Prints ``python3 -m timeit 'sum(range(10**6))'`` and the load average
first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import (
    DEFAULT_CORPUS,
    CorpusServer,
    ServerProcess,
    SyntheticNginxServer,
    exported_pages,
    print_table,
    run_measured,
    summary,
)

_SERVE_ONLY = """
import asyncio, sys
from crawlq.engine.local_crawl import LocalProcessesCrawl
from crawlq.settings import Settings
settings = Settings.build(cli=dict(delay_s=0, concurrency=16, host_concurrency=16,
                                   store=sys.argv[2], allowed_domains=tuple(sys.argv[3:])))
crawl = LocalProcessesCrawl(settings, [sys.argv[1]], processes=2, child_args=["-q"],
                            owner_works=False)
report = asyncio.run(crawl.run())
print("pages stored:", report.counters.pages, report.stopped_by)
"""


def _commands(url: str, store: Path, domains: list[str]) -> dict[str, list[str]]:
    crawl = [sys.executable, "-m", "crawlq", "crawl", url, "--store", str(store), "-q"]
    crawl += ["--delay", "0", "--concurrency", "16", "--host-concurrency", "16"]
    crawl += [arg for d in domains for arg in ("--allow-domain", d)]
    return {
        "P=1": [*crawl, "--processes", "1"],
        "P=2": [*crawl, "--processes", "2"],
        "P=2 serve": [sys.executable, "-c", _SERVE_ONLY, url, str(store), *domains],
    }


def main() -> None:
    """Parse the command line, serve, run the rows in alternation, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--synthetic", type=int, default=None, metavar="N")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--rows", nargs="+", default=["P=1", "P=2", "P=2 serve"])
    args = parser.parse_args()
    speed = subprocess.run(
        [sys.executable, "-m", "timeit", "sum(range(10**6))"], capture_output=True, text=True
    ).stdout.strip()
    print(f"timeit: {speed}; loadavg: {Path('/proc/loadavg').read_text().strip()}")
    workdir = Path(tempfile.mkdtemp(prefix="crawlq-bench-cores-"))
    server: ServerProcess
    domains: list[str] = []
    if args.synthetic:
        server = SyntheticNginxServer(args.synthetic, args.hosts, workdir)
        domains = list(server.hosts)  # type: ignore[attr-defined]
    else:
        server = CorpusServer(args.corpus, workdir)
    print(f"server: {server.kind}, {server.url}")
    results: dict[str, list[tuple[int, float, float, float]]] = {r: [] for r in args.rows}
    try:
        for round_ in range(args.rounds):
            for row in args.rows:
                store = workdir / f"r{round_}-{row.replace(' ', '_')}.db"
                cmd = _commands(server.url, store, domains)[row]
                run = run_measured(cmd, workdir, store.stem, env=dict(os.environ))
                if run.returncode != 0:
                    raise SystemExit(f"{row} exited {run.returncode}: {run.stderr[-2000:]}")
                pages, distinct = exported_pages(store, workdir)
                if pages != distinct:
                    raise SystemExit(f"{row}: {pages} page records for {distinct} URLs")
                other = max(0.0, (run.machine_busy_s - run.cpu_s) / run.wall_s)
                results[row].append((pages, run.wall_s, run.cpu_s, other))
                print(
                    f"round {round_ + 1} {row}: {pages} pages, {run.wall_s:.2f} s wall, "
                    f"{pages / run.wall_s:.0f} pages/s, {run.cpu_s:.2f} CPU s, "
                    f"{run.cpu_s / pages * 1e6:.0f} µs/page, other load {other:.2f}",
                    flush=True,
                )
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(
        ["row", "pages", "pages/s", "CPU µs/page", "cores used", "other load"],
        [
            [
                row,
                str(runs[0][0]) if runs else "-",
                summary([p / w for p, w, _, _ in runs], ".0f"),
                summary([c / p * 1e6 for p, _, c, _ in runs], ".0f"),
                summary([c / w for _, w, c, _ in runs]),
                summary([o for *_, o in runs]),
            ]
            for row, runs in results.items()
        ],
    )


if __name__ == "__main__":
    main()
