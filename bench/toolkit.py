"""Benchmark: what issue 22's toolkit (typed items, pipelines, …) costs per page.

    python bench/toolkit.py [--rounds 5] [--variants dict pydantic] [--engines embedded workers2]
    python bench/toolkit.py --variants dict --install base=VENV/bin/python --install head=…

The PostgreSQL manual (1,169 pages reachable from index.html), served on 127.0.0.1 by nginx
when installed (else ``crawlq serve``), crawled with politeness off (``--delay 0``, host
concurrency 16 per process) by a spider yielding one item of five fields per page:

* variant ``dict``: `toolkit_spider.DictSpider`, a plain dict, no pipelines;
* variant ``default`` (only when asked for): crawlq's default spider, no items, the
  lightest crawl (where a fixed cost per page weighs most);
* variant ``pydantic``: `toolkit_pipelines.PydanticSpider`, a pydantic model (the spider's
  ``item_type``) through two pipelines (``item_pipelines``: a sync one that normalises the
  title and may raise ``DropItem``, an ``async def`` one that fills the section). It needs
  ``crawlq.items`` and pydantic in the install: without them the variant is skipped, with a
  line saying what is missing;

on two engines:

* ``embedded``: ``crawlq crawl URL --spider S --store <fresh>.db`` (SQLite frontier and store);
* ``workersP`` (``workers2`` by default): ``crawlq seed --frontier redis://… --job <fresh>``
  (not measured), then P ``crawlq worker … --exit-when-done`` processes started together; the
  workers' CPU is measured (each by its own ``wait4``, summed), wall time from their start to
  the last exit. The job's keys are deleted after.

Rows run in alternation, round after round. A run is valid when it exits 0, stores exactly
the expected distinct pages, none twice, and one item per page (distinct ``_url``, none
twice; none for ``default``); for ``pydantic``, the async pipeline's ``section`` must be
filled on some items.
``--install LABEL=PYTHON`` (twice or more) runs each row once per install within a round
(the "toolkit unused" check: variant ``dict`` on this tree against the commit before issue
22). Prints each run, the summary per row (median [min-max]), then pair by pair within each
round: ``pydantic`` against ``dict`` (what the toolkit costs when used) and each install
against the first. ``python3 -m timeit 'sum(range(10**6))'`` is taken before and after.
Run by hand; never part of the test suite. Columns: README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _crawlers import Result, Target
from _harness import (
    DEFAULT_CORPUS,
    DEFAULT_REDIS,
    REPO,
    CorpusServer,
    RedisProbe,
    crawlq_command,
    exported_pages,
    git_state,
    install_state,
    precompile_crawlq,
    print_table,
    run_measured,
    run_measured_group,
    summary,
    versions,
)
from _report import Round, cpu_us_per_page, print_run, summary_table, write_json

BENCH = REPO / "bench"
SPIDERS: dict[str, str | None] = {
    "dict": "toolkit_spider:DictSpider",
    "pydantic": "toolkit_pipelines:PydanticSpider",
    "default": None,  # crawlq's default spider: follows links, yields no items
}
DEFAULT_VARIANTS = ("dict", "pydantic")
CONCURRENCY = 16
_ENGINE = re.compile(r"embedded|workers([1-9][0-9]?)")
_CHECK_TOOLKIT = (
    "import crawlq.items, pydantic\n"
    "crawlq.items.DropItem, crawlq.items.adapt\n"
    "import toolkit_pipelines\n"
)


def engine_name(text: str) -> str:
    """An argparse type: ``embedded`` or ``workersP`` (P worker processes).

    Raises:
        ValueError: Not an engine name.
    """
    if not _ENGINE.fullmatch(text):
        raise ValueError(f"not an engine: {text!r} (embedded, workersP)")
    return text


def bench_env() -> dict[str, str]:
    """This process's environment with ``bench/`` first on ``PYTHONPATH`` (the spiders)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(BENCH) + (os.pathsep + path if path else "")}


def toolkit_missing(python: str | None = None) -> str | None:
    """Why the ``pydantic`` variant cannot run on ``python``'s install, or None when it can.

    The reason is the last line of the import error (``ModuleNotFoundError: No module named
    'crawlq.items'``, or pydantic's).
    """
    proc = subprocess.run(
        [python or sys.executable, "-c", _CHECK_TOOLKIT],
        capture_output=True,
        text=True,
        env=bench_env(),
    )
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {proc.returncode}"


def timeit_figure() -> str:
    """``python3 -m timeit 'sum(range(10**6))'``'s line, taken now (the machine's speed)."""
    proc = subprocess.run(
        ["python3", "-m", "timeit", "sum(range(10**6))"], capture_output=True, text=True
    )
    return proc.stdout.strip() or proc.stderr.strip()


@dataclass
class Row:
    """One row: an engine, a variant, and the install that runs it."""

    engine: str
    variant: str
    label: str = ""  # install label ("" when the bench's own Python runs it)
    python: str | None = None

    @property
    def name(self) -> str:
        """``crawlq embedded dict`` / ``crawlq workers2 pydantic @head``."""
        return f"crawlq {self.engine} {self.variant}" + (f" @{self.label}" if self.label else "")


def exported_items(store: Path, workdir: Path, python: str | None) -> dict[str, int]:
    """Item records, distinct ``_url``s and items with a ``section`` in a crawlq store."""
    out = workdir / f"{store.name}.items.jsonl"
    cmd = [*crawlq_command(python), "export", "--store", str(store), "--what", "items"]
    subprocess.run([*cmd, "-o", str(out)], check=True, capture_output=True)
    records, urls, sections = 0, set(), 0
    with out.open() as f:
        for line in f:
            if line.strip():
                item = json.loads(line)
                records += 1
                urls.add(item.get("_url") or item.get("url"))
                sections += item.get("section") is not None
    return {"item_records": records, "items": len(urls), "sections": sections}


def _finish(row: Row, run_result: Result, store: Path, work: Path, expected: int) -> Result:
    """Add the store's item counts to a run and check it (pages, then items)."""
    result = run_result.check(expected)
    if store.exists():
        result.extra |= exported_items(store, work, row.python)
    problems = [result.note] if not result.valid else []
    items, records = result.extra.get("items", 0), result.extra.get("item_records", 0)
    expected_items = 0 if SPIDERS[row.variant] is None else expected
    if items != expected_items:
        problems.append(f"{items:g} items != {expected_items}")
    if records != items:
        problems.append(f"{records - items:g} items stored twice")
    if row.variant == "pydantic" and not result.extra.get("sections"):
        problems.append("no item has a section: the async pipeline did not run")
    result.valid = not problems
    result.note = "; ".join(problems)
    return result


def _spider_args(row: Row) -> list[str]:
    spider = SPIDERS[row.variant]
    return ["--spider", spider] if spider else []


def run_embedded(row: Row, target: Target, work: Path) -> Result:
    """``crawlq crawl URL --spider S --store <fresh>`` with politeness off."""
    store = work / f"embedded-{uuid.uuid4().hex[:8]}.db"
    cmd = [*crawlq_command(row.python), "crawl", target.url, *_spider_args(row)]
    cmd += ["--delay", "0", "--concurrency", str(CONCURRENCY)]
    cmd += ["--host-concurrency", str(CONCURRENCY), "--store", str(store)]
    run = run_measured(cmd, work, store.stem, env=bench_env())
    records, pages = exported_pages(store, work, row.python) if store.exists() else (0, 0)
    match = re.search(r"elapsed: ([\d.]+)s", run.stdout)
    crawl_s = float(match[1]) if match else None
    return _finish(
        row, Result(row.name, pages, records, run, crawl_s), store, work, target.expected
    )


def run_workers(row: Row, target: Target, work: Path, probe: RedisProbe) -> Result:
    """``crawlq seed`` a fresh job, then P ``crawlq worker --exit-when-done`` measured together.

    Host concurrency is ``P * 16`` (politeness is enforced in Redis across all workers, so 16
    would cap P workers at one's concurrency). The job's keys are deleted after.
    """
    processes = int(row.engine.removeprefix("workers"))
    job = f"bench-{uuid.uuid4().hex[:8]}"
    store = work / f"{job}.db"
    base = [*crawlq_command(row.python)]
    common = ["--frontier", probe.url, "--job", job, *_spider_args(row)]
    common += ["--store", str(store)]
    seed = [*base, "seed", *common, target.url, "--delay", "0"]
    seed += ["--host-concurrency", str(CONCURRENCY * processes)]
    worker = [*base, "worker", *common, "--concurrency", str(CONCURRENCY), "--exit-when-done"]
    try:
        subprocess.run(seed, check=True, capture_output=True, env=bench_env())
        cpu_before, cmds_before = probe.counters()
        run = run_measured_group([worker] * processes, work, job, env=bench_env())
        cpu_after, cmds_after = probe.counters()
    finally:
        probe.delete_job(job)
    records, pages = exported_pages(store, work, row.python) if store.exists() else (0, 0)
    result = Result(row.name, pages, records, run, None)
    result.redis_cpu_s = cpu_after - cpu_before
    result.extra["redis_cmds_per_page"] = (cmds_after - cmds_before) / max(pages, 1)
    return _finish(row, result, store, work, target.expected)


def pair_table(rounds: Sequence[Round], pairs: Sequence[tuple[str, str]], title: str) -> None:
    """``other`` against ``first`` for each pair of rows, taken within each round.

    Differences are other minus first: pages/s in %, CPU µs per page absolute and in %; a
    range that spans 0 is within these rounds' noise. Only rounds with both runs valid count.
    """
    out = []
    for first, other in pairs:
        both = [
            (rnd[first], rnd[other])
            for rnd in rounds
            if first in rnd and other in rnd and rnd[first].valid and rnd[other].valid
        ]
        if not both:
            continue
        speed = [(b.pages_per_s / a.pages_per_s - 1) * 100 for a, b in both]
        d_us = [cpu_us_per_page(b) - cpu_us_per_page(a) for a, b in both]
        d_pct = [(cpu_us_per_page(b) / cpu_us_per_page(a) - 1) * 100 for a, b in both]
        costlier = sum(d > 0 for d in d_us)
        out.append(
            [
                f"{other} vs {first}",
                _signed(speed, ".1f"),
                _signed(d_us, ".0f"),
                _signed(d_pct, ".1f"),
                "yes" if min(d_us) <= 0 <= max(d_us) else "no",
                f"{costlier}/{len(both)}",
                summary([max(a.other_load, b.other_load) for a, b in both]),
            ]
        )
    if out:
        print(f"\n{title}, pair by pair within each round: median [min to max]\n")
        header = ["rows", "pages/s Δ %", "CPU µs/page Δ", "CPU/page Δ %", "range spans 0"]
        print_table([*header, "pairs costlier", "other load, worse of pair"], out)


def _signed(values: Sequence[float], fmt: str) -> str:
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"{mid:+{fmt}} [{lo:+{fmt}} to {hi:+{fmt}}]"


def items_table(rounds: Sequence[Round], names: Sequence[str]) -> None:
    """Per row: items stored and items with a section (the same in every valid run)."""
    out = []
    for name in names:
        ok = [rnd[name] for rnd in rounds if name in rnd and rnd[name].valid]
        if ok:
            out.append(
                [
                    name,
                    summary([r.extra.get("items", 0) for r in ok], ".0f"),
                    summary([r.extra.get("sections", 0) for r in ok], ".0f"),
                ]
            )
    if out:
        print()
        print_table(["row", "items", "items with a section"], out)


def make_rows(
    engines: Sequence[str], variants: Sequence[str], installs: dict[str, str]
) -> tuple[list[Row], list[str]]:
    """The rows to run, in round order, and one line per variant skipped on an install."""
    targets = list(installs.items()) or [("", None)]
    rows, skipped = [], []
    for label, python in targets:
        for variant in variants:
            why = toolkit_missing(python) if variant == "pydantic" else None
            if why:
                where = f" on install {label}" if label else ""
                skipped.append(f"variant pydantic{where}: skipped ({why})")
                continue
            rows += [Row(engine, variant, label, python) for engine in engines]
    order = {e: i for i, e in enumerate(engines)}
    rows.sort(key=lambda r: order[r.engine])  # stable: variant, then install, per engine
    return rows, skipped


def comparisons(rows: Sequence[Row], labels: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """The pairs to compare: pydantic vs dict per engine (and install), each install vs the
    first per engine and variant."""
    names = {(r.engine, r.variant, r.label): r.name for r in rows}
    out: dict[str, list[tuple[str, str]]] = {"toolkit used: pydantic vs dict": [], "installs": []}
    for (engine, variant, label), name in names.items():
        if variant == "pydantic" and (engine, "dict", label) in names:
            out["toolkit used: pydantic vs dict"].append((names[(engine, "dict", label)], name))
        if labels and label != labels[0] and (engine, variant, labels[0]) in names:
            out["installs"].append((names[(engine, variant, labels[0])], name))
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    corpus = os.environ.get("CRAWLQ_TEST_CORPUS") or DEFAULT_CORPUS
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path(corpus),
        help="default: $CRAWLQ_TEST_CORPUS, else the manual in ../shared",
    )
    parser.add_argument("--expect", type=int, default=1169, help="reachable pages (1,169)")
    parser.add_argument("--redis", default=DEFAULT_REDIS, help="Redis for the workers rows")
    parser.add_argument(
        "--variants", nargs="+", default=list(DEFAULT_VARIANTS), choices=list(SPIDERS)
    )
    parser.add_argument("--engines", nargs="+", default=["embedded", "workers2"], type=engine_name)
    parser.add_argument(
        "--install",
        action="append",
        default=[],
        metavar="LABEL=PYTHON",
        help="run each row with the crawlq of this venv's Python (repeat to alternate)",
    )
    parser.add_argument("--aiohttp", action="store_true", help="serve with aiohttp, not nginx")
    parser.add_argument("--json", type=Path, help="also write every run to this JSON file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit status 1 when no row could run or a run was invalid."""
    args = parse_args(argv)
    installs = dict(spec.split("=", 1) for spec in args.install)
    rows, skipped = make_rows(args.engines, args.variants, installs)
    probe = RedisProbe(args.redis) if any(r.engine != "embedded" for r in rows) else None
    precompile_crawlq()
    for python in installs.values():
        precompile_crawlq(python)
    info = versions() | {"redis-server": probe.version if probe else "-", "git": git_state()}
    info |= {f"install {label}": install_state(py) for label, py in installs.items()}
    info["timeit before"] = timeit_figure()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}  "
        + "  ".join(f"{k} {v}" for k, v in info.items())
    )
    for line in skipped:
        print(line)
    if not rows:
        return 1
    rounds = _run_rounds(rows, args, probe)
    names = [r.name for r in rows]
    print()
    summary_table(rounds, names)
    items_table(rounds, names)
    for title, pairs in comparisons(rows, list(installs)).items():
        pair_table(rounds, pairs, title)
    print(f"\ntimeit before: {info['timeit before']}; after: {timeit_figure()}")
    print(f"git at start: {info['git']}; at end: {git_state()}")
    if args.json:
        write_json(args.json, info, [(f"round {i}", rnd) for i, rnd in enumerate(rounds)])
    return 0 if all(r.valid for rnd in rounds for r in rnd.values()) else 1


def _run_rounds(
    rows: Sequence[Row], args: argparse.Namespace, probe: RedisProbe | None
) -> list[Round]:
    """Every row once per round, in order, each charged the server CPU it caused."""
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="crawlq-toolkit-") as tmp:
        work = Path(tmp)
        server = CorpusServer(args.corpus, work, force_aiohttp=args.aiohttp)
        print(f"server: {server.kind} at {server.url}; rows: {', '.join(r.name for r in rows)}")
        target = Target(server.url, ["127.0.0.1"], args.expect)
        try:
            for i in range(args.rounds):
                rnd: Round = {}
                for row in rows:
                    before = server.cpu_s()
                    if row.engine == "embedded":
                        result = run_embedded(row, target, work)
                    else:
                        assert probe is not None
                        result = run_workers(row, target, work, probe)
                    result.server_cpu_s = server.cpu_s() - before
                    rnd[row.name] = result
                    print_run(f"round {i}", result)
                rounds.append(rnd)
        finally:
            server.stop()
            if probe:
                probe.close()
    return rounds


if __name__ == "__main__":
    sys.exit(main())
