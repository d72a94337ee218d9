"""Measured runs: wall time, CPU and memory of a process tree, and the machine's busy time.

How things are measured:

- **CPU s**: user + system seconds of the measured process and every descendant it reaped
  (``os.wait4`` returns the child's ``RUSAGE_BOTH``: itself plus its waited-for children), so
  ``crawlq --processes 2`` counts both workers.
- **peak RSS, one process**: ``ru_maxrss`` from the same ``wait4``, the largest peak of any
  single process in the tree (exact, kernel-kept).
- **peak RSS, tree**: the largest sum of ``VmRSS`` over the process and its descendants, sampled
  from ``/proc`` every 0.1 s (may miss a spike shorter than that).
- **other load**: busy CPU of the whole machine during the run (``/proc/stat``) minus the
  crawler's, the server's and Redis's, in cores (CPU s / wall s): work of other users of the
  machine, plus this harness's own sampling. Runs with a high value were slowed by others.
- **Redis CPU s**: delta of ``used_cpu_user + used_cpu_sys`` from ``INFO cpu`` (the whole
  server: other clients' work on the same Redis counts too).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Run", "machine_busy_s", "run_measured", "tree_cpu_s"]

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
