"""The crawlers the benchmarks compare, each run once as its own process tree and measured.

Every runner takes a `Target` (seed URL, hosts in scope, expected page count) and a fresh
work directory, and returns a `Result`: pages counted the runner's own way (distinct URLs in
the crawlq store, the Scrapy feed, or the bare loop's count), whether the run is valid (exit
status 0 and exactly the expected distinct pages, none stored twice), and the measurements
(see `_harness`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _harness import (
    REPO,
    RedisProbe,
    Run,
    ServerProcess,
    crawlq_command,
    exported_pages,
    jsonl_counts,
)
from _harness import run_measured as _run


@dataclass
class Target:
    """What to crawl: a seed, the hosts in scope (all on the seed's port), expected pages."""

    url: str
    hosts: list[str]
    expected: int


@dataclass
class Result:
    """One measured crawl."""

    row: str
    pages: int  # distinct URLs stored / written / counted
    records: int  # page records, feed lines or the count printed (duplicates included)
    run: Run
    crawl_s: float | None  # the crawler's own elapsed time, start-up excluded, when it says
    redis_cpu_s: float | None = None
    server_cpu_s: float = 0.0
    valid: bool = False
    note: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def pages_per_s(self) -> float:
        """Distinct pages per wall second, process start-up included."""
        return self.pages / self.run.wall_s

    @property
    def pages_per_cpu_s(self) -> float:
        """Distinct pages per CPU second of the crawler's process tree."""
        return self.pages / self.run.cpu_s

    @property
    def other_load(self) -> float:
        """Cores kept busy by everything else on the machine during the run (see _harness)."""
        own = self.run.cpu_s + self.server_cpu_s + (self.redis_cpu_s or 0.0)
        return max(0.0, self.run.machine_busy_s - own) / self.run.wall_s

    def check(self, expected: int) -> Result:
        """Set `valid` (and `note` when not) against the expected page count."""
        problems = []
        if self.run.returncode != 0:
            problems.append(f"exit {self.run.returncode}")
        if self.pages != expected:
            problems.append(f"{self.pages} distinct pages != {expected}")
        if self.row.startswith("crawlq") and self.records != self.pages:
            problems.append(f"{self.records - self.pages} pages stored twice")
        self.valid = not problems
        self.note = "; ".join(problems) if problems else self.note
        return self


def _elapsed(text: str, pattern: str) -> float | None:
    match = re.search(pattern, text)
    return float(match[1]) if match else None


def _crawl_args(target: Target, concurrency: int, host_concurrency: int) -> list[str]:
    args = [target.url, "--delay", "0", "--concurrency", str(concurrency)]
    args += ["--host-concurrency", str(host_concurrency)]
    if len(target.hosts) > 1:
        for host in target.hosts:
            args += ["--allow-domain", host]
        args += ["--allow-private"]  # the other 127.0.0.x hosts are no seed hosts
    return args


def crawlq_embedded(target: Target, work: Path, concurrency: int = 16) -> Result:
    """``crawlq crawl`` with the embedded SQLite frontier and store, politeness off."""
    store = work / f"embedded-{uuid.uuid4().hex[:8]}.db"
    cmd = [*crawlq_command(), "crawl", *_crawl_args(target, concurrency, concurrency)]
    run = _run([*cmd, "--store", str(store)], work, store.stem)
    records, pages = exported_pages(store, work) if store.exists() else (0, 0)
    crawl_s = _elapsed(run.stdout, r"elapsed: ([\d.]+)s")
    return Result("crawlq embedded", pages, records, run, crawl_s).check(target.expected)


def crawlq_redis(
    target: Target, work: Path, probe: RedisProbe, processes: int, concurrency: int = 16
) -> Result:
    """``crawlq crawl --frontier redis://… --processes P`` on a fresh job; keys deleted after.

    Host concurrency is the total concurrency (``P * concurrency``), so politeness (enforced
    in the frontier across all workers) does not cap the extra process.
    """
    job = f"bench-{uuid.uuid4().hex[:8]}"
    store = work / f"{job}.db"
    cmd = [*crawlq_command(), "crawl", *_crawl_args(target, concurrency, concurrency * processes)]
    cmd += ["--frontier", probe.url, "--processes", str(processes), "--job", job]
    cpu_before, cmds_before = probe.counters()
    try:
        run = _run([*cmd, "--store", str(store)], work, job)
        cpu_after, cmds_after = probe.counters()
    finally:
        probe.delete_job(job)
    records, pages = exported_pages(store, work) if store.exists() else (0, 0)
    crawl_s = _elapsed(run.stdout, r"elapsed: ([\d.]+)s")
    result = Result(f"crawlq redis P={processes}", pages, records, run, crawl_s)
    result.redis_cpu_s = cpu_after - cpu_before
    result.extra["redis_cmds_per_page"] = (cmds_after - cmds_before) / max(pages, 1)
    return result.check(target.expected)


def celery_engine_available() -> bool:
    """Whether ``crawlq crawl`` has the Celery engine option (issue 6)."""
    help_text = subprocess.run(
        [*crawlq_command(), "crawl", "--help"], capture_output=True, text=True
    ).stdout
    return "--engine" in help_text


def crawlq_celery(
    target: Target, work: Path, probe: RedisProbe, broker: str, processes: int = 2
) -> Result:
    """``crawlq crawl --engine celery --processes P``: one local Celery worker, P pool processes.

    The broker (a Redis DB of the benchmark's own, `CELERY_BROKER`) gets a queue of its own
    (``CRAWLQ_CELERY_QUEUE``); dedup and politeness live on the probe's Redis (``--frontier``).
    The job's keys and the queue's keys are deleted after the run. Redis CPU covers the one
    server holding both DBs.
    """
    job = f"bench-{uuid.uuid4().hex[:8]}"
    store = work / f"{job}.db"
    cmd = [*crawlq_command(), "crawl", *_crawl_args(target, 16, 16), "--engine", "celery"]
    cmd += ["--broker", broker, "--frontier", probe.url, "--processes", str(processes)]
    cmd += ["--job", job, "--store", str(store)]
    env = {**os.environ, "CRAWLQ_CELERY_QUEUE": job}
    cpu_before, cmds_before = probe.counters()
    try:
        run = _run(cmd, work, job, env=env)
        cpu_after, cmds_after = probe.counters()
    finally:
        probe.delete_job(job)
        probe.delete_queue(broker, job)
    records, pages = exported_pages(store, work) if store.exists() else (0, 0)
    crawl_s = _elapsed(run.stdout, r"elapsed: ([\d.]+)s")
    result = Result(f"crawlq celery P={processes}", pages, records, run, crawl_s)
    result.redis_cpu_s = cpu_after - cpu_before
    result.extra["redis_cmds_per_page"] = (cmds_after - cmds_before) / max(pages, 1)
    return result.check(target.expected)


def scrapy(target: Target, work: Path) -> Result:
    """``scrapy runspider bench/scrapy_spider.py`` with a JSON Lines feed of one item per page."""
    feed = work / f"scrapy-{uuid.uuid4().hex[:8]}.jsonl"
    script = Path(sys.executable).parent / "scrapy"
    base = [str(script)] if script.exists() else [sys.executable, "-m", "scrapy"]
    cmd = [*base, "runspider", str(REPO / "bench" / "scrapy_spider.py")]
    cmd += ["-a", f"start_url={target.url}", "-a", f"hosts={','.join(target.hosts)}"]
    run = _run([*cmd, "-O", str(feed)], work, feed.stem)
    records, pages = jsonl_counts(feed, "url")
    crawl_s = _elapsed(run.stderr, r"'elapsed_time_seconds': ([\d.]+)")
    result = Result("scrapy", pages, records, run, crawl_s)
    if records > pages:
        result.note = f"{records - pages} extra item(s): URL fetched twice"
    return result.check(target.expected)


def bare_loop(target: Target, work: Path, concurrency: int = 16) -> Result:
    """``bench/bare_loop.py``: asyncio + aiohttp + selectolax, set dedup, no store."""
    cmd = [sys.executable, str(REPO / "bench" / "bare_loop.py"), target.url]
    cmd += ["--concurrency", str(concurrency)]
    for host in target.hosts:
        cmd += ["--allow-host", host]
    run = _run(cmd, work, f"bare-{uuid.uuid4().hex[:8]}")
    pages = int(_elapsed(run.stdout, r"pages: (\d+)") or 0)
    crawl_s = _elapsed(run.stdout, r"elapsed: ([\d.]+)s")
    return Result("bare loop", pages, pages, run, crawl_s).check(target.expected)


Runner = Callable[[Target, Path], Result]
ROW_CHOICES = ("embedded", "redis1", "redis2", "celery", "scrapy", "bare")
CELERY_BROKER = "redis://127.0.0.1:6379/12"
_ROW = re.compile(r"embedded|redis[1-9][0-9]?|celery|scrapy|bare")


def row_name(text: str) -> str:
    """An argparse type: a row name (`ROW_CHOICES`, or ``redisP`` for any P processes).

    Raises:
        ValueError: Not a row name.
    """
    if not _ROW.fullmatch(text):
        raise ValueError(f"not a row: {text!r} (embedded, redisP, celery, scrapy, bare)")
    return text


def make_rows(names: list[str], probe: RedisProbe | None) -> dict[str, Runner]:
    """The runners for the row names given (`ROW_CHOICES`), by display name, in that order.

    ``celery`` runs on the Redis DB `CELERY_BROKER` as its broker.

    Raises:
        ValueError: A Redis row without a ``probe``.
    """
    rows: dict[str, Runner] = {}
    for name in names:
        if name == "embedded":
            rows["crawlq embedded"] = crawlq_embedded
        elif name.startswith("redis"):
            if probe is None:
                raise ValueError(f"row {name} needs a Redis")
            p = int(name.removeprefix("redis"))
            rows[f"crawlq redis P={p}"] = lambda t, w, p=p: crawlq_redis(t, w, probe, p)
        elif name == "celery":
            if probe is None:
                raise ValueError("row celery needs a Redis")
            rows["crawlq celery P=2"] = lambda t, w: crawlq_celery(t, w, probe, CELERY_BROKER)
        elif name == "scrapy":
            rows["scrapy"] = scrapy
        elif name == "bare":
            rows["bare loop"] = bare_loop
    return rows


def run_round(
    rows: dict[str, Runner],
    target: Target,
    server: ServerProcess,
    work: Path,
    label: str,
    show: Callable[[str, Result], None],
) -> dict[str, Result]:
    """Run every row once, in order, charging each run the server CPU it caused."""
    results = {}
    for name, runner in rows.items():
        before = server.cpu_s()
        result = runner(target, work)
        result.server_cpu_s = server.cpu_s() - before
        results[name] = result
        show(label, result)
    return results
