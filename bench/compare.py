"""Benchmark: crawlq (embedded; Redis, 1 and 2 processes) against Scrapy, Crawlee-Python,
a bare loop and a fetch-only client.

    python bench/compare.py [--rounds 3] [--corpus PATH.tar.gz|DIR] [--rows embedded redis1 ...]
    python bench/compare.py --rows embedded bare fetch scrapy crawlee crawlee-default \
        --port-range 18400-18499
    python bench/compare.py --rows embedded redis1 --install old=VENV/bin/python --install new=…
    python bench/compare.py --rows politeness --rounds 2

Unpacks the corpus (default: the PostgreSQL 15 manual, 1,169 pages reachable from
index.html), serves it on 127.0.0.1 with nginx when installed (own config, port, pid and logs
in a temp dir) else with ``crawlq serve`` (aiohttp), then runs the rows in alternation, round
after round (A B C … A B C …), each as its own process tree with concurrency 16 and politeness
off. Prints each run, then per row the median [min-max] of every metric over the valid runs,
and the pages/s ratios crawlq/Scrapy and crawlq/bare loop taken pair by pair within a round.
A run that does not store exactly the expected distinct pages is shown as INVALID and not
counted. With ``--install LABEL=PYTHON`` (twice or more) every crawlq row runs once per
install, one after the other within each round (A B, A B, …), against the same server, and
the differences between installs are reported pair by pair. The ``politeness`` row (not in
the default rows: ~60 s a run) crawls with ``--delay 0.05 --host-concurrency 4`` on 2
Redis workers. The ``fetch`` row fetches the reachable pages (listed once, before the first
round, by an unmeasured bare-loop crawl) and parses nothing: the ceiling. Scrapy and Crawlee
run from venvs of their own (`_venvs`). ``--port-range`` keeps every server this script
starts inside a port window. The machine's speed (``timeit sum(range(10**6))``) and load
average are printed before and after and kept per run. Run by hand; never part of the test
suite. See README.md for the columns.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _crawlers import (
    DEFAULT_ROWS,
    Target,
    celery_engine_available,
    discover_urls,
    make_rows,
    row_name,
    run_round,
)
from _harness import (
    DEFAULT_CORPUS,
    DEFAULT_REDIS,
    CorpusServer,
    RedisProbe,
    git_state,
    install_state,
    machine_line,
    port_range,
    precompile_crawlq,
    set_port_window,
    versions,
)
from _report import (
    Round,
    install_table,
    politeness_table,
    print_run,
    ratio_table,
    summary_table,
    write_json,
)
from _venvs import peer_version, use_python

BASELINES = ("scrapy", "crawlee memory", "crawlee default", "bare loop", "fetch only")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="a directory, or a tarball of one"
    )
    parser.add_argument("--expect", type=int, default=1169, help="reachable pages (1,169)")
    parser.add_argument("--redis", default=DEFAULT_REDIS, help="Redis for the redis rows")
    parser.add_argument(
        "--rows",
        nargs="+",
        default=list(DEFAULT_ROWS),
        type=row_name,
        help="rows, in order: embedded, redisP (P processes), celery, scrapy, crawlee, "
        "crawlee-default, bare, fetch, politeness",
    )
    parser.add_argument(
        "--port-range",
        type=port_range,
        metavar="LO-HI",
        help="listen only on ports in this window (default: any free port)",
    )
    parser.add_argument("--crawlee-python", help="a venv's Python with crawlee[parsel]")
    parser.add_argument("--scrapy-python", help="a venv's Python with Scrapy")
    parser.add_argument(
        "--install",
        action="append",
        default=[],
        metavar="LABEL=PYTHON",
        help="run each crawlq row with the crawlq of this venv's Python (repeat to alternate)",
    )
    parser.add_argument("--aiohttp", action="store_true", help="serve with aiohttp, not nginx")
    parser.add_argument("--json", type=Path, help="also write every run to this JSON file")
    args = parser.parse_args()
    set_port_window(args.port_range)
    use_python("crawlee", args.crawlee_python)
    use_python("scrapy", args.scrapy_python)
    names = list(args.rows)
    celery_note = ""
    if "celery" in names and not celery_engine_available():
        names.remove("celery")
        celery_note = "celery row: skipped (`crawlq crawl --engine celery` does not exist yet)"
    installs = dict(spec.split("=", 1) for spec in args.install)
    needs_redis = any(r.startswith(("redis", "celery", "politeness")) for r in names)
    probe = RedisProbe(args.redis) if needs_redis else None
    rows = make_rows(names, probe, installs or None)
    precompile_crawlq()
    for python in installs.values():
        precompile_crawlq(python)
    info = versions() | {"redis-server": probe.version if probe else "-", "git": git_state()}
    info |= {f"install {label}": install_state(py) for label, py in installs.items()}
    info |= {peer: peer_version(peer) for peer in _peers(names)}
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}  "
        + "  ".join(f"{k} {v}" for k, v in info.items())
    )
    info["machine at start"] = machine_line()
    print(info["machine at start"], flush=True)
    if celery_note:
        print(celery_note)
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="crawlq-compare-") as tmp:
        work = Path(tmp)
        server = CorpusServer(args.corpus, work, force_aiohttp=args.aiohttp)
        print(f"server: {server.kind} at {server.url}; rows: {', '.join(rows)}", flush=True)
        print(f"corpus: {server.corpus.describe()}", flush=True)
        target = Target(server.url, ["127.0.0.1"], args.expect)
        try:
            if "fetch" in names:
                target.urls = discover_urls(target, work)
            for i in range(args.rounds):
                rounds.append(run_round(rows, target, server, work, f"round {i}", print_run))
        finally:
            server.stop()
            if probe:
                probe.close()
    print()
    summary_table(rounds, list(rows))
    pairs = [(m, b) for m in rows if m.startswith("crawlq") for b in BASELINES if b in rows]
    ratio_table(rounds, pairs)
    if len(installs) > 1:
        install_table(rounds, list(rows), list(installs))
    politeness_table(rounds, list(rows))
    print(f"\ngit at start: {info['git']}; at end: {git_state()}")
    info["machine at end"] = machine_line()
    print(f"{info['machine at start']} (start)\n{info['machine at end']} (end)")
    for label, python in installs.items():
        print(
            f"install {label} at start: {info[f'install {label}']}; at end: {install_state(python)}"
        )
    if args.json:
        write_json(args.json, info, [(f"round {i}", rnd) for i, rnd in enumerate(rounds)])


def _peers(names: list[str]) -> list[str]:
    """The peers in their own venvs that the rows ``names`` run."""
    peers = ["crawlee"] if any(n.startswith("crawlee") for n in names) else []
    return peers + (["scrapy"] if "scrapy" in names else [])


if __name__ == "__main__":
    main()
