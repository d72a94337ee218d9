"""Printing the benchmarks' results: one line per run, then Markdown summary and ratio tables."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _crawlers import Result
from _harness import print_table, summary

Round = dict[str, Result]


def print_run(label: str, r: Result) -> None:
    """One line for one run, INVALID and the reason when it does not count."""
    redis = "" if r.redis_cpu_s is None else f" redis cpu {r.redis_cpu_s:.2f}s"
    if "redis_cmds_per_page" in r.extra:  # every command Redis ran, inside Lua scripts too
        redis += f" ({r.extra['redis_cmds_per_page']:.1f} cmds/page)"
    crawl = "" if r.crawl_s is None else f" (crawl {r.crawl_s:.2f}s)"
    print(
        f"{label} {r.row:18} {r.pages:6d} pages {r.run.wall_s:6.2f}s{crawl} "
        f"{r.pages_per_s:6.0f} p/s cpu {r.run.cpu_s:5.2f}s rss {r.run.max_rss_mb:4.0f} MB "
        f"(tree {r.run.tree_rss_mb:4.0f}){redis} server cpu {r.server_cpu_s:.2f}s "
        f"other load {r.other_load:.2f} timeit {r.speed_ms:.1f} ms loadavg {r.loadavg:.2f}"
        + ("" if r.valid else f" INVALID ({r.note})")
        + (f" [{r.note}]" if r.valid and r.note else ""),
        flush=True,
    )


def summary_table(rounds: Sequence[Round], names: Sequence[str]) -> None:
    """Per row: valid runs and median [min-max] of each metric over the valid runs.

    *timeit ms* and *loadavg* are the machine's speed and 1-minute load average taken just
    before each of the row's runs (`_measure.machine_speed_ms`).
    """
    header = ["row", "valid", "pages/s", "wall s", "in-crawl pages/s", "CPU s", "CPU µs/page"]
    header += ["peak RSS MB"]
    header += ["tree RSS MB", "Redis CPU s", "server CPU s", "other load", "timeit ms", "loadavg"]
    rows = []
    for name in names:
        ok = [rnd[name] for rnd in rounds if name in rnd and rnd[name].valid]
        in_crawl = [r.pages / r.crawl_s for r in ok if r.crawl_s]
        redis = [r.redis_cpu_s for r in ok if r.redis_cpu_s is not None]
        rows.append(
            [
                name,
                f"{len(ok)}/{sum(name in rnd for rnd in rounds)}",
                summary([r.pages_per_s for r in ok], ".0f"),
                summary([r.run.wall_s for r in ok]),
                summary(in_crawl, ".0f"),
                summary([r.run.cpu_s for r in ok]),
                summary([cpu_us_per_page(r) for r in ok], ".0f"),
                summary([r.run.max_rss_mb for r in ok], ".0f"),
                summary([r.run.tree_rss_mb for r in ok], ".0f"),
                summary(redis),
                summary([r.server_cpu_s for r in ok]),
                summary([r.other_load for r in ok]),
                summary([r.speed_ms for r in ok], ".1f"),
                summary([r.loadavg for r in ok]),
            ]
        )
    print_table(header, rows)


def cpu_us_per_page(r: Result) -> float:
    """CPU µs of the crawler's process tree per distinct page."""
    return r.run.cpu_s / r.pages * 1e6


def _signed(values: Sequence[float], fmt: str) -> str:
    """``median [min to max]`` with signs (differences)."""
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"{mid:+{fmt}} [{lo:+{fmt}} to {hi:+{fmt}}]"


def install_table(rounds: Sequence[Round], names: Sequence[str], labels: Sequence[str]) -> None:
    """Each install against the first, per row: pages/s and CPU µs per page, pair by pair.

    A pair is the two runs of one row in one round (run one after the other against the same
    server), both valid. Differences are the other install minus the first; a range that
    spans 0 says the difference is within the run-to-run noise of these rounds.
    """
    base_label, out = labels[0], []
    bases = dict.fromkeys(n.rsplit(" @", 1)[0] for n in names if " @" in n)
    for base in bases:
        first = f"{base} @{base_label}"
        for label in labels[1:]:
            other = f"{base} @{label}"
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
            loads = [max(a.other_load, b.other_load) for a, b in both]
            noise = "yes" if min(d_us) <= 0 <= max(d_us) else "no"
            out.append(
                [
                    f"{base}: {label} vs {base_label}",
                    _signed(speed, ".1f"),
                    _signed(d_us, ".0f"),
                    _signed(d_pct, ".1f"),
                    noise,
                    summary(loads),
                    str(len(both)),
                ]
            )
    if out:
        print("\ninstalls, pair by pair within each round: median [min-max]\n")
        header = ["row", "pages/s Δ %", "CPU µs/page Δ", "CPU/page Δ %", "range spans 0"]
        print_table([*header, "other load, worse of pair", "pairs"], out)


def politeness_table(rounds: Sequence[Round], names: Sequence[str]) -> None:
    """The politeness rows: pages/s against the two ceilings (see `_crawlers.crawlq_politeness`)."""
    out = []
    for name in names:
        ok = [rnd[name] for rnd in rounds if name in rnd and rnd[name].valid]
        ok = [r for r in ok if "ceiling_per_host" in r.extra]
        if not ok:
            continue
        per_host, per_slot = ok[0].extra["ceiling_per_host"], ok[0].extra["ceiling_per_slot"]
        in_crawl = [r.pages / r.crawl_s for r in ok if r.crawl_s]
        out.append(
            [
                name,
                summary([r.pages_per_s for r in ok], ".1f"),
                summary(in_crawl, ".1f"),
                f"{per_host:g}: " + summary([r.pages_per_s / per_host * 100 for r in ok], ".0f"),
                f"{per_slot:g}: " + summary([r.pages_per_s / per_slot * 100 for r in ok], ".0f"),
                summary([cpu_us_per_page(r) for r in ok], ".0f"),
                summary([r.extra.get("span_rate", 0.0) for r in ok], ".1f"),
                summary([r.extra.get("gap_median_ms", 0.0) for r in ok], ".1f"),
                summary([r.extra.get("gap_p5_ms", 0.0) for r in ok], ".0f"),
                summary([r.extra.get("gap_min_ms", 0.0) for r in ok], ".0f"),
                summary([r.extra.get("redis_cmds_per_page", 0.0) for r in ok], ".1f"),
                summary([r.other_load for r in ok]),
            ]
        )
    if out:
        print("\npoliteness: pages/s (wall) against the ceilings 1/delay and concurrency/delay\n")
        header = ["row", "pages/s", "in-crawl pages/s", "% of 1/delay", "% of conc/delay"]
        header += ["CPU µs/page", "starts/s, first to last", "gap median ms", "gap p5 ms"]
        print_table([*header, "gap min ms", "Redis cmds/page", "other load"], out)


def ratio_table(rounds: Sequence[Round], pairs: Sequence[tuple[str, str]]) -> None:
    """Row A over row B, in pages/s and in pages per CPU second, taken within each round.

    Only rounds where both runs are valid count. Pages per CPU second is the steadier of the
    two when other work shares the machine.
    """
    out = []
    for mine, base in pairs:
        both = [
            (rnd[mine], rnd[base])
            for rnd in rounds
            if mine in rnd and base in rnd and rnd[mine].valid and rnd[base].valid
        ]
        if any(mine in rnd and base in rnd for rnd in rounds):
            speed = [a.pages_per_s / b.pages_per_s for a, b in both]
            thrift = [a.pages_per_cpu_s / b.pages_per_cpu_s for a, b in both]
            out.append([f"{mine} / {base}", summary(speed), summary(thrift), str(len(both))])
    if out:
        print("\nratios, pair by pair within each round: median [min-max]\n")
        print_table(["ratio", "pages/s", "pages per CPU s", "pairs"], out)


def write_json(path: Path, info: dict[str, Any], rounds: Sequence[tuple[str, Round]]) -> None:
    """Every run (output text left out) with the run's label, as JSON."""
    runs = []
    for label, rnd in rounds:
        for r in rnd.values():
            record = asdict(r) | {
                "label": label,
                "pages_per_s": r.pages_per_s,
                "pages_per_cpu_s": r.pages_per_cpu_s,
                "other_load": r.other_load,
            }
            record["run"].pop("stdout")
            record["run"].pop("stderr")
            runs.append(record)
    path.write_text(json.dumps({"info": info, "runs": runs}, indent=1))
