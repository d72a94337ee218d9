"""Measured runs: wall time, CPU and memory of a process tree, and the machine's busy time.

How things are measured:

- **CPU s**: user + system seconds of the measured process and every descendant it reaped
  (``os.wait4`` returns the child's ``RUSAGE_BOTH``: itself plus its waited-for children), so
  ``crawlq --processes 2`` counts both workers.
- **a group of processes** (`run_measured_group`, e.g. 2 ``crawlq worker``): CPU s is the
  sum over the group, each from its own ``wait4``; wall s runs from the first start to the
  last exit.
- **peak RSS, one process**: ``ru_maxrss`` from the same ``wait4``, the largest peak of any
  single process in the tree (exact, kernel-kept).
- **peak RSS, tree**: the largest sum of ``VmRSS`` over the process and its descendants, sampled
  from ``/proc`` every 0.1 s (may miss a spike shorter than that).
- **other load**: busy CPU of the whole machine during the run (``/proc/stat``) minus the
  crawler's, the server's and Redis's, in cores (CPU s / wall s): work of other users of the
  machine, plus this harness's own sampling. Runs with a high value were slowed by others.
- **Redis CPU s**: delta of ``used_cpu_user + used_cpu_sys`` from ``INFO cpu`` (the whole
  server: other clients' work on the same Redis counts too).
- **machine speed** (`machine_speed_ms`), taken just before each run: the figure
  ``python3 -m timeit 'sum(range(10**6))'`` prints (best loop of 5 repeats, in ms), from
  5 repeats of 4 loops in the bench's own Python (~0.1 s); with **loadavg** (the 1-minute
  load average from ``/proc/loadavg`` at the same moment) it says how busy the machine was
  around a row's runs.
"""

from __future__ import annotations

import os
import subprocess
import time
import timeit
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Run",
    "loadavg",
    "machine_busy_s",
    "machine_line",
    "machine_speed_ms",
    "run_measured",
    "run_measured_group",
    "tree_cpu_s",
]

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") / 1024


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, utime+stime ticks, rss pages) for every process in /proc."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(stat.parent.name)] = (
            int(fields[1]),
            int(fields[11]) + int(fields[12]),
            int(fields[21]),
        )
    return table


def _tree(table: dict[int, tuple[int, int, int]], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores, all processes) since boot."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICKS


def machine_speed_ms() -> float:
    """ms per ``sum(range(10**6))``: the best loop of 5 repeats of 4 (as ``-m timeit`` reports)."""
    return min(timeit.repeat("sum(range(10**6))", number=4, repeat=5)) / 4 * 1000


def loadavg() -> float:
    """The 1-minute load average now."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def machine_line() -> str:
    """``python3 -m timeit 'sum(range(10**6))'``'s own output and the load averages, one line.

    Runs the system ``python3`` as a user would (~2 s): the figure quoted beside every table.
    """
    out = subprocess.run(
        ["python3", "-m", "timeit", "sum(range(10**6))"], capture_output=True, text=True
    ).stdout.strip()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return f"python3 -m timeit 'sum(range(10**6))': {out}; loadavg {load}"


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + sys) used so far by the live process ``root`` and its descendants."""
    table = _proc_table()
    return sum(table[p][1] for p in _tree(table, root)) / _TICKS


@dataclass
class Run:
    """One measured process run (see the module docstring for how each number is taken)."""

    returncode: int
    wall_s: float
    cpu_s: float
    max_rss_mb: float
    tree_rss_mb: float
    machine_busy_s: float  # busy CPU of the whole machine during the run, every process
    stdout: str
    stderr: str


def run_measured(
    cmd: Sequence[str], workdir: Path, name: str, env: dict[str, str] | None = None
) -> Run:
    """Run ``cmd`` to completion, measuring wall time, CPU and memory of its process tree.

    Output goes to ``workdir/name.out`` and ``.err`` (never a pipe, so a chatty process
    cannot block) and is returned as text.
    """
    out_path, err_path = workdir / f"{name}.out", workdir / f"{name}.err"
    with out_path.open("w") as out, err_path.open("w") as err:
        busy = machine_busy_s()
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        peak_tree = 0.0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            table = _proc_table()
            rss = sum(table[p][2] for p in _tree(table, proc.pid)) * _PAGE_KB / 1024
            peak_tree = max(peak_tree, rss)
            time.sleep(0.1)
        wall = time.perf_counter() - start
        busy = machine_busy_s() - busy
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(
        returncode=proc.returncode,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_rss_mb=usage.ru_maxrss / 1024,
        tree_rss_mb=max(peak_tree, usage.ru_maxrss / 1024),
        machine_busy_s=busy,
        stdout=out_path.read_text(),
        stderr=err_path.read_text(),
    )


def run_measured_group(
    cmds: Sequence[Sequence[str]], workdir: Path, name: str, env: dict[str, str] | None = None
) -> Run:
    """Start every command of ``cmds`` at once and measure them together until all exit.

    ``cpu_s``: user + system CPU of every process and its reaped children, summed (one
    ``os.wait4`` per process); ``max_rss_mb``: the largest ``ru_maxrss`` of any one;
    ``tree_rss_mb``: the largest sum of ``VmRSS`` over all of them and their descendants,
    sampled every 0.1 s; ``returncode``: the first non-zero exit status, else 0. Output of
    process ``k`` goes to ``workdir/name-k.out`` and ``.err``; ``stdout`` and ``stderr``
    join them in order, each behind a ``# name-k`` line.
    """
    outs = [(workdir / f"{name}-{k}.out", workdir / f"{name}-{k}.err") for k in range(len(cmds))]
    files = [(o.open("w"), e.open("w")) for o, e in outs]
    try:
        busy = machine_busy_s()
        start = time.perf_counter()
        procs = [
            subprocess.Popen(cmd, stdout=o, stderr=e, env=env)
            for cmd, (o, e) in zip(cmds, files, strict=True)
        ]
        usages: dict[int, tuple[int, os.struct_rusage]] = {}
        peak_tree = 0.0
        while len(usages) < len(procs):
            for proc in procs:
                if proc.pid not in usages:
                    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                    if pid:
                        usages[proc.pid] = (os.waitstatus_to_exitcode(status), usage)
            table = _proc_table()
            pids = [p for proc in procs for p in _tree(table, proc.pid)]
            peak_tree = max(peak_tree, sum(table[p][2] for p in pids) * _PAGE_KB / 1024)
            time.sleep(0.1)
        wall = time.perf_counter() - start
        busy = machine_busy_s() - busy
    finally:
        for o, e in files:
            o.close()
            e.close()
    codes = [usages[proc.pid][0] for proc in procs]
    for proc, code in zip(procs, codes, strict=True):
        proc.returncode = code
    rusages = [usages[proc.pid][1] for proc in procs]
    max_rss = max(u.ru_maxrss for u in rusages) / 1024
    return Run(
        returncode=next((c for c in codes if c != 0), 0),
        wall_s=wall,
        cpu_s=sum(u.ru_utime + u.ru_stime for u in rusages),
        max_rss_mb=max_rss,
        tree_rss_mb=max(peak_tree, max_rss),
        machine_busy_s=busy,
        stdout="".join(f"# {name}-{k}\n{o.read_text()}" for k, (o, _) in enumerate(outs)),
        stderr="".join(f"# {name}-{k}\n{e.read_text()}" for k, (_, e) in enumerate(outs)),
    )
