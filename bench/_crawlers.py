"""The crawlers the benchmarks compare, each run once as its own process tree and measured.

Every runner takes a `Target` (seed URL, hosts in scope, expected page count) and a fresh
work directory, and returns a `Result`: pages counted the runner's own way (distinct URLs in
the crawlq store, the Scrapy feed, or the bare loop's count), whether the run is valid (exit
status 0 and exactly the expected distinct pages, none stored twice), and the measurements
(see `_measure`).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from _harness import (
    REPO,
    RedisProbe,
    Run,
    ServerProcess,
    crawlq_command,
    exported_pages,
    jsonl_counts,
    loadavg,
    machine_speed_ms,
)
from _harness import run_measured as _run
from _venvs import peer_python


@dataclass
class Target:
    """What to crawl: a seed, the hosts in scope (all on the seed's port), expected pages."""

    url: str
    hosts: list[str]
    expected: int
    urls: Path | None = None  # the reachable pages, one a line (`discover_urls`): the fetch row


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
    store: str = ""  # the crawlq store, when the row writes one (deleted with the work dir)
    speed_ms: float = 0.0  # `machine_speed_ms` just before the run
    loadavg: float = 0.0  # 1-minute load average just before the run

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
        """Cores kept busy by everything else on the machine during the run (see _measure)."""
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


def _crawl_args(
    target: Target, concurrency: int, host_concurrency: int, delay: float = 0.0
) -> list[str]:
    args = [target.url, "--delay", f"{delay:g}", "--concurrency", str(concurrency)]
    args += ["--host-concurrency", str(host_concurrency)]
    if len(target.hosts) > 1:
        for host in target.hosts:
            args += ["--allow-domain", host]
        args += ["--allow-private"]  # the other 127.0.0.x hosts are no seed hosts
    return args


def crawlq_embedded(
    target: Target, work: Path, concurrency: int = 16, python: str | None = None
) -> Result:
    """``crawlq crawl`` with the embedded SQLite frontier and store, politeness off.

    ``python``: the install whose ``crawlq`` runs (default: the bench's own Python).
    """
    store = work / f"embedded-{uuid.uuid4().hex[:8]}.db"
    cmd = [*crawlq_command(python), "crawl", *_crawl_args(target, concurrency, concurrency)]
    run = _run([*cmd, "--store", str(store)], work, store.stem)
    records, pages = exported_pages(store, work, python) if store.exists() else (0, 0)
    crawl_s = _elapsed(run.stdout, r"elapsed: ([\d.]+)s")
    return Result("crawlq embedded", pages, records, run, crawl_s).check(target.expected)


def crawlq_redis(
    target: Target,
    work: Path,
    probe: RedisProbe,
    processes: int,
    concurrency: int = 16,
    python: str | None = None,
    delay: float = 0.0,
    host_concurrency: int | None = None,
) -> Result:
    """``crawlq crawl --frontier redis://… --processes P`` on a fresh job; keys deleted after.

    Politeness off by default: ``delay`` 0 and host concurrency the total concurrency
    (``P * concurrency``), so politeness (enforced in the frontier across all workers) does
    not cap the extra process. ``python``: the install whose ``crawlq`` runs.
    """
    job = f"bench-{uuid.uuid4().hex[:8]}"
    store = work / f"{job}.db"
    per_host = concurrency * processes if host_concurrency is None else host_concurrency
    cmd = [*crawlq_command(python), "crawl", *_crawl_args(target, concurrency, per_host, delay)]
    cmd += ["--frontier", probe.url, "--processes", str(processes), "--job", job]
    cpu_before, cmds_before = probe.counters()
    try:
        run = _run([*cmd, "--store", str(store)], work, job)
        cpu_after, cmds_after = probe.counters()
    finally:
        probe.delete_job(job)
    records, pages = exported_pages(store, work, python) if store.exists() else (0, 0)
    crawl_s = _elapsed(run.stdout, r"elapsed: ([\d.]+)s")
    result = Result(f"crawlq redis P={processes}", pages, records, run, crawl_s, store=str(store))
    result.redis_cpu_s = cpu_after - cpu_before
    result.extra["redis_cmds_per_page"] = (cmds_after - cmds_before) / max(pages, 1)
    return result.check(target.expected)


POLITE_DELAY_S = 0.05
POLITE_HOST_CONCURRENCY = 4
POLITE_PROCESSES = 2


def crawlq_politeness(
    target: Target, work: Path, probe: RedisProbe, python: str | None = None
) -> Result:
    """The Redis row with politeness on (issue 11): ``--delay 0.05 --host-concurrency 4``,
    2 worker processes (concurrency 16 each) on a fresh job; keys deleted after.

    crawlq's delay spaces the *starts* of two requests to one host across all workers
    (`lease.lua` leases one request per host per call when the delay is above 0 and moves the
    host's next-allowed time by the delay), so one host gets at most 1/delay requests per
    second (20/s here) whatever the host concurrency. ``extra`` holds both ceilings: per host
    (1/delay, the one that applies) and per slot (concurrency/delay, 80/s, which would apply
    if each of the host's slots had its own delay).
    """
    result = crawlq_redis(
        target,
        work,
        probe,
        POLITE_PROCESSES,
        python=python,
        delay=POLITE_DELAY_S,
        host_concurrency=POLITE_HOST_CONCURRENCY,
    )
    result.row = f"crawlq polite P={POLITE_PROCESSES}"
    result.extra |= _request_spacing(Path(f"{result.store}.pages.jsonl"))
    result.extra["ceiling_per_host"] = 1 / POLITE_DELAY_S * len(target.hosts)
    result.extra["ceiling_per_slot"] = POLITE_HOST_CONCURRENCY / POLITE_DELAY_S * len(target.hosts)
    return result


def _request_spacing(pages_jsonl: Path) -> dict[str, float]:
    """Spacing of the pages' request starts (``fetched_at - elapsed_s``, to the millisecond).

    ``span_rate``: (pages - 1) / (last start - first start), the steady rate without start-up
    and the end; ``gap_min_ms``, ``gap_p5_ms``, ``gap_median_ms``: gaps between consecutive
    starts, all workers together (a start is taken when the fetch begins, after the lease that
    moved the host's next-allowed time, so lease-to-send latency can shorten one gap and
    lengthen the next).
    """
    if not pages_jsonl.exists():
        return {}
    starts = []
    with pages_jsonl.open() as f:
        for line in f:
            if line.strip():
                page = json.loads(line)
                at = datetime.fromisoformat(page["fetched_at"].replace("Z", "+00:00"))
                starts.append(at.timestamp() - float(page.get("elapsed_s") or 0.0))
    starts.sort()
    if len(starts) < 3:
        return {}
    gaps = sorted((b - a) * 1000 for a, b in itertools.pairwise(starts))
    return {
        "span_rate": (len(starts) - 1) / (starts[-1] - starts[0]),
        "gap_min_ms": gaps[0],
        "gap_p5_ms": gaps[len(gaps) // 20],
        "gap_median_ms": statistics.median(gaps),
    }


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
    """``scrapy runspider bench/scrapy_spider.py`` with a JSON Lines feed of one item per page.

    Scrapy runs from the bench's own venv when it has the ``scrapy`` script, else from a
    venv of its own (`_venvs.peer_python`).
    """
    feed = work / f"scrapy-{uuid.uuid4().hex[:8]}.jsonl"
    python = peer_python("scrapy")
    script = Path(python).parent / "scrapy"
    base = [str(script)] if script.exists() else [python, "-m", "scrapy"]
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


def crawlee(target: Target, work: Path, storage: str = "memory") -> Result:
    """``bench/crawlee_crawler.py`` (ParselCrawler) with Crawlee's own venv's Python.

    ``storage``: ``memory`` (``MemoryStorageClient``) or ``default`` (the file-system client,
    writing request queue, dataset and key-value store under the work dir).
    """
    tag = f"crawlee-{storage}-{uuid.uuid4().hex[:8]}"
    cmd = [peer_python("crawlee"), str(REPO / "bench" / "crawlee_crawler.py"), target.url]
    cmd += ["--concurrency", "16", "--storage", storage, "--storage-dir", str(work / tag)]
    for host in target.hosts:
        cmd += ["--allow-host", host]
    run = _run(cmd, work, tag)
    pages = int(_elapsed(run.stdout, r"pages: (\d+)") or 0)
    records = int(_elapsed(run.stdout, r"records: (\d+)") or 0)
    crawl_s = _elapsed(run.stdout, r"elapsed: ([\d.]+)s")
    result = Result(f"crawlee {storage}", pages, records, run, crawl_s)
    if records > pages:
        result.note = f"{records - pages} extra item(s): URL fetched twice"
    return result.check(target.expected)


def discover_urls(target: Target, work: Path) -> Path:
    """The pages a crawl reaches, one a line, from one unmeasured ``bare_loop.py`` run.

    Raises:
        RuntimeError: The bare loop failed, or did not reach ``target.expected`` pages.
    """
    out = work / "reachable-urls.txt"
    cmd = [sys.executable, str(REPO / "bench" / "bare_loop.py"), target.url, "--urls-out", str(out)]
    for host in target.hosts:
        cmd += ["--allow-host", host]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    count = len(out.read_text().split()) if out.exists() else 0
    if proc.returncode != 0 or count != target.expected:
        raise RuntimeError(
            f"URL discovery reached {count} pages, not {target.expected}: {proc.stderr[-2000:]}"
        )
    return out


def fetch_only(target: Target, work: Path, concurrency: int = 16) -> Result:
    """``bench/fetch_only.py``: aiohttp fetches of the known reachable URLs, no parsing."""
    if target.urls is None:
        raise ValueError("the fetch row needs the URL list (discover_urls)")
    cmd = [sys.executable, str(REPO / "bench" / "fetch_only.py"), str(target.urls)]
    run = _run([*cmd, "--concurrency", str(concurrency)], work, f"fetch-{uuid.uuid4().hex[:8]}")
    pages = int(_elapsed(run.stdout, r"pages: (\d+)") or 0)
    crawl_s = _elapsed(run.stdout, r"elapsed: ([\d.]+)s")
    return Result("fetch only", pages, pages, run, crawl_s).check(target.expected)


Runner = Callable[[Target, Path], Result]
ROW_CHOICES = (
    "embedded",
    "redis1",
    "redis2",
    "celery",
    "scrapy",
    "crawlee",
    "crawlee-default",
    "bare",
    "fetch",
    "politeness",
)
DEFAULT_ROWS = ROW_CHOICES[:-1]  # politeness takes ~60 s a run: only when asked for
CELERY_BROKER = "redis://127.0.0.1:6379/12"
_ROW = re.compile(
    r"embedded|redis[1-9][0-9]?|celery|scrapy|crawlee|crawlee-default|bare|fetch|politeness"
)


# the rows that are no crawlq: row name -> (display name, runner)
PEER_ROWS: dict[str, tuple[str, Runner]] = {
    "scrapy": ("scrapy", scrapy),
    "crawlee": ("crawlee memory", crawlee),
    "crawlee-default": ("crawlee default", lambda t, w: crawlee(t, w, storage="default")),
    "bare": ("bare loop", bare_loop),
    "fetch": ("fetch only", fetch_only),
}


def row_name(text: str) -> str:
    """An argparse type: a row name (`ROW_CHOICES`, or ``redisP`` for any P processes).

    Raises:
        ValueError: Not a row name.
    """
    if not _ROW.fullmatch(text):
        raise ValueError(
            f"not a row: {text!r} (embedded, redisP, celery, scrapy, crawlee, "
            "crawlee-default, bare, fetch, politeness)"
        )
    return text


def _labelled(runner: Runner, name: str) -> Runner:
    def run(target: Target, work: Path) -> Result:
        result = runner(target, work)
        result.row = name
        return result

    return run


def make_rows(
    names: list[str],
    probe: RedisProbe | None,
    installs: dict[str, str] | None = None,
) -> dict[str, Runner]:
    """The runners for the row names given (`ROW_CHOICES`), by display name, in that order.

    ``celery`` runs on the Redis DB `CELERY_BROKER` as its broker. ``installs`` (label ->
    Python of a venv with crawlq installed): the embedded, redisP and politeness rows run
    once per install, one after the other (``crawlq embedded @A``, ``… @B``), so a round
    alternates the installs; default: this Python's crawlq, no label.

    Raises:
        ValueError: A Redis row without a ``probe``.
    """
    rows: dict[str, Runner] = {}
    targets = [(f" @{label}", py) for label, py in installs.items()] if installs else [("", None)]
    for name in names:
        if name == "embedded":
            for tag, py in targets:
                run = lambda t, w, py=py: crawlq_embedded(t, w, python=py)  # noqa: E731
                rows[f"crawlq embedded{tag}"] = _labelled(run, f"crawlq embedded{tag}")
        elif name.startswith("redis"):
            rp, p = _probe_for(name, probe), int(name.removeprefix("redis"))
            for tag, py in targets:
                run = lambda t, w, rp=rp, p=p, py=py: crawlq_redis(t, w, rp, p, python=py)  # noqa: E731
                rows[f"crawlq redis P={p}{tag}"] = _labelled(run, f"crawlq redis P={p}{tag}")
        elif name == "politeness":
            rp, label = _probe_for(name, probe), f"crawlq polite P={POLITE_PROCESSES}"
            for tag, py in targets:
                run = lambda t, w, rp=rp, py=py: crawlq_politeness(t, w, rp, py)  # noqa: E731
                rows[f"{label}{tag}"] = _labelled(run, f"{label}{tag}")
        elif name == "celery":
            rp = _probe_for(name, probe)
            rows["crawlq celery P=2"] = lambda t, w, rp=rp: crawlq_celery(t, w, rp, CELERY_BROKER)
        elif name in PEER_ROWS:
            label, runner = PEER_ROWS[name]
            rows[label] = runner
    return rows


def _probe_for(row: str, probe: RedisProbe | None) -> RedisProbe:
    """The Redis probe that ``row`` runs against; a Redis row without one is an error."""
    if probe is None:
        raise ValueError(f"row {row} needs a Redis")
    return probe


def run_round(
    rows: dict[str, Runner],
    target: Target,
    server: ServerProcess,
    work: Path,
    label: str,
    show: Callable[[str, Result], None],
) -> dict[str, Result]:
    """Run every row once, in order, charging each run the server CPU it caused.

    Just before each run, the machine's speed (`machine_speed_ms`) and 1-minute load
    average are taken and kept with the run.
    """
    results = {}
    for name, runner in rows.items():
        speed_ms, load = machine_speed_ms(), loadavg()
        before = server.cpu_s()
        result = runner(target, work)
        result.server_cpu_s = server.cpu_s() - before
        result.speed_ms, result.loadavg = speed_ms, load
        results[name] = result
        show(label, result)
    return results
