"""Several worker processes of one job on this machine, shown and reported as one.

``crawlq crawl --processes P`` on a shared frontier seeds here and works in P children
(`MultiProcessCrawl`); ``crawlq worker --processes P`` starts P workers of a job
(`MultiProcessWorker`). Each child is a ``crawlq worker --processes 1`` of the job
(`WorkerProcesses`: started on this machine and stopped together); this process shows
progress from the frontier and the store, forwards a stop to every child, and reports the job
once, with the counters of every child summed (each writes its own when it ends,
`WorkerProcesses.reports`), or the counters the store gained (`counted_since`) when a child
ended without writing them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from crawlq.engine.backends import open_backends
from crawlq.engine.crawl import CrawlReport, Progress, counted_pages, job_counts
from crawlq.engine.outage import read_through_outage
from crawlq.engine.outcome import WorkerCounters
from crawlq.engine.seeding import seed
from crawlq.errors import (
    ConfigError,
    CrawlqError,
)
from crawlq.frontier import Frontier
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.settings.handoff import own_env
from crawlq.store import Store, StoreCounts

__all__ = ["MultiProcessCrawl", "MultiProcessWorker", "WorkerProcesses", "counted_since"]

logger = logging.getLogger(__name__)


class _Supervisor:
    """What both runners share: the pool of children, the stop, and progress from the backends.

    Subclasses set ``_frontier`` and ``_store`` while their children run.
    """

    def __init__(self, pool: WorkerProcesses) -> None:
        self.pool = pool
        self._frontier: Frontier | None = None
        self._store: Store | None = None
        self._before = StoreCounts(pages=0, items=0, dead=0, filtered=0)
        self._stopped = False
        self._started = time.monotonic()
        self._reports: list[dict[str, Any]] | None = None  # the children's, once they exited

    def stop(self, *, force: bool = False) -> None:
        """Forward the stop to every child (SIGTERM, or SIGKILL with ``force``)."""
        self._stopped = True
        self.pool.stop(force=force)

    def _counters(self, store: StoreCounts) -> tuple[WorkerCounters, bool]:
        """This run's counters once the children have exited, and whether they are full.

        The children's own counts summed (`WorkerProcesses.reports`: links not followed,
        retries, round trips...) when every child reported; else what the store gained
        since the start (`counted_since`), and False.
        """
        if self._reports is not None:
            try:
                return WorkerCounters.summed(self._reports, self._started), True
            except (KeyError, TypeError, ValueError) as exc:
                logger.warning("a worker process's counts could not be read: %s", exc)
        return counted_since(self._before, store), False

    async def progress(self) -> Progress | None:
        """Frontier counts and pages stored since the start, for all children together."""
        if self._frontier is None or self._store is None:
            return None
        return Progress(
            frontier=await self._frontier.stats(),
            counters=counted_since(self._before, await self._store.counts(), self._started),
            in_flight=0,
            elapsed_s=time.monotonic() - self._started,
        )


class MultiProcessCrawl(_Supervisor):
    """``crawlq crawl --processes P`` on a shared frontier: seed here, work in P children.

    Each child is a ``crawlq worker --exit-when-done`` of the same job; this process only
    seeds, shows progress from the frontier and the store, and stops the children on a
    signal.

    Args:
        settings: The crawl's settings (``frontier`` and ``job`` set).
        requests: Seed requests.
        processes: Worker processes to start (>= 1).
        worker_args: Extra ``crawlq worker`` arguments (concurrency, verbosity).
        retry_dead: Requeue the job's dead letters before seeding.
    """

    def __init__(
        self,
        settings: Settings,
        requests: Sequence[CrawlRequest],
        processes: int,
        worker_args: Sequence[str] = (),
        *,
        retry_dead: bool = False,
    ) -> None:
        if settings.frontier is None or settings.job is None:
            raise ConfigError("processes", "several worker processes need a shared --frontier")
        self.settings = settings
        self.requests = list(requests)
        self.retry_dead = retry_dead
        env = {"CRAWLQ_FRONTIER": settings.frontier}  # not argv: it may hold a password
        super().__init__(
            WorkerProcesses(
                ["--job", settings.job, "--exit-when-done", "--processes", "1", *worker_args],
                processes,
                env,
            )
        )

    async def run(self) -> CrawlReport:
        """Seed, start the children, wait for all of them, report.

        Raises:
            CrawlqError: A child exited with an error (its own message is on stderr).
        """
        self._started = time.monotonic()
        seeded = await seed(self.settings, self.requests, retry_dead=self.retry_dead)
        async with open_backends(seeded.settings, runs_spider=False) as backends:
            self._frontier, self._store = backends.frontier, backends.store
            self._before = await backends.store.counts()
            limit, store_, job_settings = self.settings.max_pages, backends.store, backends.settings
            budget_spent = False

            async def spent() -> bool:  # --max-pages: the children share one job's total
                nonlocal budget_spent
                counted = await counted_pages(store_, job_settings)
                budget_spent = limit is not None and counted >= limit
                return budget_spent

            if limit is not None:
                # Each child gets its share of the budget (the parent also stops them all
                # once the job has stored `limit` pages, whichever child stored them).
                done = await counted_pages(store_, job_settings)
                share = -(-max(0, limit - done) // self.pool.count)
                self.pool.args += ["--max-pages-share", str(share)]
            # The job keeps no store password: the children get this process's store URL
            # (equal to the job's but for the password) through their environment.
            self.pool.env["CRAWLQ_STORE"] = backends.settings.store
            # Code and local paths come from this command's own options, never the job's.
            given = self.settings
            self.pool.env.update(own_env(given))
            if given.warc_dir is not None and "warc_dir" in given.explicit:
                self.pool.env["CRAWLQ_WARC_DIR"] = given.warc_dir
            self.pool.start()
            try:
                codes = await self.pool.wait(spent if limit is not None else None)
            finally:
                self._frontier = self._store = None
                self._reports = self.pool.reports()
            store = await read_through_outage(backends.store.counts)
            mine = await read_through_outage(
                functools.partial(job_counts, backends.store, backends.settings)
            )
            frontier = await read_through_outage(backends.frontier.stats)
            budget_left_work = limit is not None and frontier.pending > 0  # shares spent
            failed = [c for c in codes if c not in (0, 1, -15)]
            # A child killed mid-crawl loses nothing: its leases expire and the others
            # finish them. The job is done when nothing is left, whatever the exit codes.
            finished = all(c == 0 for c in codes) or (bool(failed) and frontier.pending == 0)
            counted = store.pages if mine is None else mine.pages
            if budget_spent or (limit is not None and counted >= limit):
                stopped_by = "max_pages"
            elif finished and not self._stopped:
                stopped_by = "max_pages" if budget_left_work else "done"
            else:
                stopped_by = "stopped"
            counters, full = self._counters(store)
            report = CrawlReport(
                stopped_by=stopped_by,
                counters=counters,
                store=store,
                frontier=frontier,
                elapsed_s=time.monotonic() - self._started,
                seeded=seeded.queued,
                full_counters=full,
                replayed=seeded.replayed,
                job_pages=None if mine is None else mine.pages,
                job_store=mine,
            )
        if failed and stopped_by == "stopped":
            raise CrawlqError(
                f"worker processes exited with {codes} before the job was done; re-run the "
                "same command to resume"
            )
        if failed:
            logger.warning("worker processes exited with %s; the others finished the job", codes)
        return report


class MultiProcessWorker(_Supervisor):
    """``crawlq worker --processes P``: P worker processes of one job, shown and reported as one.

    Each child is a ``crawlq worker --processes 1`` of the job, started with this process's
    pid (so it prints no progress or summary of its own and leaves stopping to this
    process); this process shows one live progress display from the frontier and the store,
    forwards a stop to every child, and reports the job once.

    Args:
        settings: This process's settings (``frontier`` and ``job`` set).
        processes: Worker processes to start (>= 1).
        worker_args: The children's ``crawlq worker`` arguments (no secrets: the frontier
            and store URLs go in ``env``).
        env: Variables for the children's environment (``CRAWLQ_FRONTIER``, ``CRAWLQ_STORE``).
        exit_when_done: The children exit when the whole job is drained.
    """

    def __init__(
        self,
        settings: Settings,
        processes: int,
        worker_args: Sequence[str],
        env: dict[str, str],
        *,
        exit_when_done: bool = False,
    ) -> None:
        self.settings = settings
        self.exit_when_done = exit_when_done
        super().__init__(WorkerProcesses([*worker_args, "--processes", "1"], processes, env))

    async def run(self) -> CrawlReport:
        """Bind the job, start the children, wait for all of them, report.

        Raises:
            ConfigError: As `WorkerService.run` (the job was never seeded, settings that
                conflict with the job's): checked here once, before any child starts.
            CrawlqError: A child exited with an error before it was asked to stop (its own
                message is on stderr).
        """
        self._started = time.monotonic()
        async with open_backends(self.settings, runs_spider=False) as backends:
            self._frontier, self._store = backends.frontier, backends.store
            self._before = await backends.store.counts()
            self.pool.start()
            try:
                codes = await self.pool.wait()
            finally:
                self._frontier = self._store = None
                self._reports = self.pool.reports()
            store = await read_through_outage(backends.store.counts)
            mine = await read_through_outage(
                functools.partial(job_counts, backends.store, backends.settings)
            )
            frontier = await read_through_outage(backends.frontier.stats)
        failed = [c for c in codes if c not in (0, -15)]
        if failed and not self._stopped:
            raise CrawlqError(f"worker processes exited with {codes}")
        done = self.exit_when_done and not self._stopped and frontier.pending == 0
        counters, full = self._counters(store)
        return CrawlReport(
            stopped_by="done" if done else "stopped",
            counters=counters,
            store=store,
            frontier=frontier,
            elapsed_s=time.monotonic() - self._started,
            seeded=0,
            full_counters=full,
            job_pages=None if mine is None else mine.pages,
            job_store=mine,
        )


def counted_since(
    before: StoreCounts, now: StoreCounts, started_s: float | None = None
) -> WorkerCounters:
    """The counters of a run whose work other processes did: what the store gained.

    Pages stored, and pages with spider errors by kind, since ``before`` (kinds whose count
    fell, as after a ``crawlq reparse``, count 0).
    """
    counters = WorkerCounters(
        pages=now.pages - before.pages,
        spider_errors=Counter(now.spider_errors_by_type) - Counter(before.spider_errors_by_type),
    )
    if started_s is not None:
        counters.started_s = started_s
    return counters


class WorkerProcesses:
    """``count`` child processes running ``python -m crawlq worker ARGS``.

    Each child is a complete worker of the same job (its own event loop, fetcher and
    connections), so a crash of one loses nothing: its leases expire and others take them.
    Each child is told this process's pid (the hidden ``--parent-pid``) and stops gracefully
    by itself when this process is gone, even killed with SIGKILL.

    Secrets never go on a child's command line (``/proc/PID/cmdline`` is readable by every
    user of the machine): a frontier or store URL travels in ``env`` (``CRAWLQ_FRONTIER``,
    ``CRAWLQ_STORE``), which only the child's owner can read.

    Each child writes what it did (`crawlq.engine.outcome.WorkerCounters.as_json`) to a file
    of its own in a private temporary directory when it ends (the hidden
    ``--counters-file``), which `reports` reads once they have all exited.

    Args:
        args: Arguments after ``crawlq worker`` (``--job``, ...): no secrets.
        count: Number of processes, at least 1.
        env: Variables to set in the children's environment, on top of this process's.
    """

    def __init__(
        self, args: Sequence[str], count: int, env: Mapping[str, str] | None = None
    ) -> None:
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        self.args = [
            sys.executable, "-m", "crawlq", "worker", *args, "--parent-pid", str(os.getpid())
        ]  # fmt: skip
        self.count = count
        self.env = dict(env or {})
        self.procs: list[subprocess.Popen[bytes]] = []
        self._reports: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> None:
        """Start the processes (their output goes to this process's stderr)."""
        env = {**os.environ, **self.env}
        self._reports = tempfile.TemporaryDirectory(prefix="crawlq-workers-")
        files = [os.path.join(self._reports.name, f"{i}.json") for i in range(self.count)]
        self.procs = [
            subprocess.Popen([*self.args, "--counters-file", file], env=env) for file in files
        ]
        logger.info("started %d worker processes: %s", self.count, [p.pid for p in self.procs])

    def reports(self) -> list[dict[str, Any]] | None:
        """What each child wrote when it ended (after `wait`), then forget the files.

        None when a child wrote nothing readable (killed, or ended by an error): the
        children's counts are then incomplete.
        """
        if self._reports is None:
            return None
        try:
            found = []
            for file in sorted(Path(self._reports.name).iterdir()):
                report = json.loads(file.read_text("utf-8"))
                if not isinstance(report, dict):
                    return None
                found.append(report)
            return found if len(found) == len(self.procs) else None
        except (OSError, ValueError):
            return None
        finally:
            self._reports.cleanup()
            self._reports = None

    def stop(self, *, force: bool = False) -> None:
        """Ask every running child to stop: SIGTERM (graceful), or SIGKILL with ``force``."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL if force else signal.SIGTERM)

    async def wait(self, stop_when: Callable[[], Awaitable[bool]] | None = None) -> list[int]:
        """Wait for every child to exit; returns their exit codes.

        Args:
            stop_when: Asked every 0.05 s while children run; once it answers True, the
                children are stopped gracefully (`stop`) and waited for.
        """
        while any(p.poll() is None for p in self.procs):
            await asyncio.sleep(0.2 if stop_when is None else 0.05)
            if stop_when is not None and await stop_when():
                logger.info("stopping the worker processes")
                self.stop()
                stop_when = None
        return [int(p.returncode) for p in self.procs]
