"""Where a crawl's CPU goes, stage by stage, in µs per page: the profile issue 25 quotes.

    python bench/profile_stages.py                       # the manual, crawlq and bare, 3 crawls
    python bench/profile_stages.py --synthetic 20000 --hosts 8 --crawls 1
    python bench/profile_stages.py --crawlers crawlq --tool cprofile --corpus DIR|TARBALL

Serves the corpus (default: the PostgreSQL manual) with nginx (else ``crawlq serve``), or the
generated site (``--synthetic N``, nginx over files), and crawls it ``--crawls`` times per
crawler, each crawl a fresh process run by ``bench/stage_probe.py`` (in-process, with a GC
timer):

- ``crawlq``: ``crawlq crawl URL --delay 0 --concurrency 16 --host-concurrency 16 --store
  <fresh>``, every other option at its default (robots.txt, SQLite frontier and store);
- ``bare``: ``bench/bare_loop.py URL --concurrency 16``.

``--tool py-spy`` (the default when py-spy is installed: ``pip install py-spy``) samples
every thread at ``--rate`` Hz without stopping the process (``--nonblocking``); only
samples of running threads count (py-spy leaves out idle ones). ``--tool cprofile`` needs
nothing, but it sees the main thread only (not the SQLite threads), times wall clock (so
waits count), and its cost per call inflates code with many small calls: compare cProfile
with cProfile only. Each sample goes to a stage by `_stages` (the innermost frame the map knows;
the map is by package, so it survives modules being merged: see `_stages` to update it).

Printed per crawler, over all its crawls: each stage's share of the samples and its **µs
per page** = share x the crawl process's own CPU s (``getrusage``, every thread; the sampler
is not counted) / pages crawled; the total with and without start-up; GC apart (seconds
inside collections, timed by ``gc.callbacks``: those samples are also in the stages above,
counted for the frame that triggered the collection); and the crawlq files whose samples
fell to *other crawlq*, which should be mapped. ``--json FILE`` saves it all. Run by hand;
the machine's speed and load are printed before and after, since on a shared machine one
profile is noisy: compare before/after profiles taken minutes apart, several crawls each.
"""

from __future__ import annotations

import argparse
import json
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _harness import (
    DEFAULT_CORPUS,
    REPO,
    CorpusServer,
    ServerProcess,
    SyntheticNginxServer,
    exported_pages,
    git_state,
    machine_line,
    port_range,
    precompile_crawlq,
    print_table,
    set_port_window,
    versions,
)
from _stages import OTHER, OTHER_CRAWLQ, STAGES, START_UP, WAITING, classify

PROBE = REPO / "bench" / "stage_probe.py"
_FRAME = re.compile(r"^(?P<function>.*) \((?P<path>.*?)(?::\d+)?\)$")


def _frames(stack: str) -> list[tuple[str, str]]:
    frames = []
    for part in stack.split(";"):
        match = _FRAME.match(part)
        if match:
            frames.append((match["function"], match["path"]))
    return frames


def pyspy_samples(raw: Path) -> Counter[tuple[str, str]]:
    """(stage, deciding file) -> samples, from py-spy's ``--format raw`` output."""
    counts: Counter[tuple[str, str]] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack.strip() and count.isdigit():
            counts[classify(_frames(stack))] += int(count)
    return counts


def cprofile_samples(dump: Path) -> Counter[tuple[str, str]]:
    """(stage, deciding file) -> µs of own time, from a cProfile dump (main thread only).

    A function's own time is classified by its file. Where the map knows neither the
    function's file nor (for built-ins, file ``~``: C code such as ``bytes.decode``) any
    file at all, its time is split among its callers by what each spent in it, up the
    callers for at most `_CALLER_DEPTH` steps: cProfile keeps no stacks, only callers.
    """
    stats: dict[Any, Any] = pstats.Stats(str(dump)).stats  # type: ignore[attr-defined]
    counts: Counter[tuple[str, str]] = Counter()

    def attribute(func: tuple[str, int, str], us: float, depth: int) -> None:
        path, _line, function = func
        stage = classify([(function, _short(path))])
        callers = stats.get(func, (0, 0, 0.0, 0.0, {}))[4]
        if stage[0] != OTHER or not callers or depth >= _CALLER_DEPTH:
            counts[stage] += int(us)
            return
        spent = sum(c[2] for c in callers.values()) or 1.0
        for caller, (_a, _b, tt, _d) in callers.items():
            attribute(caller, us * tt / spent, depth + 1)

    for func, (_cc, _nc, own_s, _ct, _callers) in stats.items():
        attribute(func, own_s * 1e6, 0)
    return counts


_CALLER_DEPTH = 4


def _short(path: str) -> str:
    """A file path as py-spy prints it: from the package down (``crawlq/engine/step.py``)."""
    for marker in ("/site-packages/", "/src/", "/lib/python3.11/", "/bench/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return path


def crawl_command(crawler: str, url: str, hosts: list[str], store: Path) -> list[str]:
    """The probe's arguments after ``OUT.json``: the crawler and its options."""
    if crawler == "crawlq":
        cmd = ["crawlq", "crawl", url, "--delay", "0", "--concurrency", "16"]
        cmd += ["--host-concurrency", "16", "--store", str(store)]
        if len(hosts) > 1:
            for host in hosts:
                cmd += ["--allow-domain", host]
            cmd += ["--allow-private"]
        return cmd
    cmd = ["bare", url, "--concurrency", "16"]
    for host in hosts:
        cmd += ["--allow-host", host]
    return cmd


def profile_once(
    crawler: str, tool: str, rate: int, url: str, hosts: list[str], work: Path, k: int
) -> dict[str, Any]:
    """One profiled crawl: samples by stage, pages, CPU s and GC s of the crawl process."""
    tag = f"{crawler}-{k}"
    probe_out, store = work / f"{tag}.probe.json", work / f"{tag}.db"
    probe = [str(PROBE), str(probe_out), *crawl_command(crawler, url, hosts, store)]
    if tool == "py-spy":
        raw = work / f"{tag}.raw"
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        cmd = [spy, "record", "--format", "raw", "-r", str(rate)]
        cmd += ["-o", str(raw), "--", sys.executable, *probe]
    else:
        raw = work / f"{tag}.pstats"
        cmd = [sys.executable, "-m", "cProfile", "-o", str(raw), *probe]
    with (work / f"{tag}.out").open("w") as out, (work / f"{tag}.err").open("w") as err:
        code = subprocess.run(cmd, stdout=out, stderr=err).returncode
    text = (work / f"{tag}.out").read_text()
    if code != 0 or not probe_out.exists():
        raise RuntimeError(f"{tag}: exit {code}: {(work / f'{tag}.err').read_text()[-2000:]}")
    if crawler == "crawlq":
        pages = exported_pages(store, work)[1]
    else:
        match = re.search(r"pages: (\d+)", text)
        pages = int(match[1]) if match else 0
    counts = pyspy_samples(raw) if tool == "py-spy" else cprofile_samples(raw)
    unit_s = 1 / rate if tool == "py-spy" else 1e-6  # a sample, or a µs of cProfile time
    probed = json.loads(probe_out.read_text())
    return {"pages": pages, "counts": counts, "unit_s": unit_s, **probed}


def report(crawler: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Print the stage table of one crawler's crawls; return it for ``--json``."""
    pages = sum(r["pages"] for r in runs)
    cpu_s = sum(r["cpu_s"] for r in runs)
    gc_s = sum(r["gc_s"] for r in runs)
    by_stage: Counter[str] = Counter()
    unmapped: Counter[str] = Counter()
    for r in runs:
        for (stage, path), n in r["counts"].items():
            by_stage[stage] += n
            if stage in (OTHER_CRAWLQ, OTHER):
                unmapped[path] += n
    waiting = by_stage.pop(WAITING, 0)
    total = sum(by_stage.values()) or 1
    us_page = cpu_s / max(pages, 1) * 1e6
    rows, out = [], {}
    for stage in STAGES:
        share = by_stage[stage] / total
        out[stage] = share * us_page
        if by_stage[stage]:
            rows.append([stage, f"{share * 100:.1f}", f"{share * us_page:.0f}"])
    steady = (1 - by_stage[START_UP] / total) * us_page
    rows.append(["**all stages**", "100.0", f"{us_page:.0f}"])
    rows.append(
        ["all but start-up", f"{(1 - by_stage[START_UP] / total) * 100:.1f}", f"{steady:.0f}"]
    )
    rows.append(
        [
            "GC (gc.callbacks; inside the stages above)",
            f"{gc_s / cpu_s * 100:.1f}",
            f"{gc_s / max(pages, 1) * 1e6:.0f}",
        ]
    )
    collections = sum(r["collections"] for r in runs)
    unit_s = runs[0]["unit_s"]
    sampled = (
        f"; sampled: {total * unit_s:.2f} thread-s running, {waiting * unit_s:.2f} waiting "
        "(left out)"
    )
    print(
        f"\n{crawler}: {len(runs)} crawl(s), {pages} pages, CPU {cpu_s:.2f} s "
        f"({us_page:.0f} µs/page), {collections} collections{sampled}\n"
    )
    print_table(["stage", "% of samples", "µs per page"], rows)
    if unmapped:
        print("\nfiles in 'other crawlq' and 'other' (map them in bench/_stages.py RULES):")
        for path, n in unmapped.most_common(10):
            print(f"  {path}: {n / total * 100:.1f} %")
    return {
        "pages": pages,
        "cpu_s": cpu_s,
        "gc_s": gc_s,
        "samples": total,
        "us_per_page": out,
        "total_us_per_page": us_page,
        "steady_us_per_page": steady,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="directory or tarball")
    parser.add_argument("--synthetic", type=int, metavar="N", help="the generated site instead")
    parser.add_argument("--hosts", type=int, default=8, help="hosts of the generated site")
    parser.add_argument(
        "--crawlers", nargs="+", default=["crawlq", "bare"], choices=["crawlq", "bare"]
    )
    parser.add_argument("--crawls", type=int, default=3, help="crawls per crawler (alternating)")
    parser.add_argument(
        "--tool", choices=["py-spy", "cprofile"], default="py-spy" if _has_pyspy() else "cprofile"
    )
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--aiohttp", action="store_true", help="serve with aiohttp, not nginx")
    parser.add_argument("--port-range", type=port_range, metavar="LO-HI")
    parser.add_argument("--json", type=Path, help="also write the tables here")
    args = parser.parse_args()
    set_port_window(args.port_range)
    precompile_crawlq()
    info = versions() | {"git": git_state(), "tool": args.tool, "machine at start": machine_line()}
    print(time.strftime("%Y-%m-%d %H:%M:%S %Z  ") + "  ".join(f"{k} {v}" for k, v in info.items()))
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in args.crawlers}
    with tempfile.TemporaryDirectory(prefix="crawlq-profile-") as tmp:
        work = Path(tmp)
        server: ServerProcess
        if args.synthetic:
            server = SyntheticNginxServer(args.synthetic, args.hosts, work)
            hosts = server.hosts
        else:
            server = CorpusServer(args.corpus, work, force_aiohttp=args.aiohttp)
            hosts = ["127.0.0.1"]
        print(f"server: {server.kind} at {server.url}", flush=True)
        try:
            for k in range(args.crawls):
                for crawler in args.crawlers:
                    run = profile_once(crawler, args.tool, args.rate, server.url, hosts, work, k)
                    runs[crawler].append(run)
                    print(
                        f"crawl {k} {crawler}: {run['pages']} pages, CPU {run['cpu_s']:.2f} s, "
                        f"GC {run['gc_s']:.3f} s",
                        flush=True,
                    )
        finally:
            server.stop()
    tables = {crawler: report(crawler, rs) for crawler, rs in runs.items()}
    info["machine at end"] = machine_line()
    print(f"\n{info['machine at start']} (start)\n{info['machine at end']} (end)")
    print(f"git at start: {info['git']}; at end: {git_state()}")
    if args.json:
        args.json.write_text(json.dumps({"info": info, "crawlers": tables}, indent=1))


def _has_pyspy() -> bool:
    return bool(shutil.which("py-spy") or (Path(sys.executable).parent / "py-spy").exists())


if __name__ == "__main__":
    main()
