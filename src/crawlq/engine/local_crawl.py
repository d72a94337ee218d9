"""An embedded crawl on every core: one owner process and its local worker processes.

``crawlq crawl`` without ``--frontier`` runs `LocalProcessesCrawl` when it may use several
processes (``--processes P``, by default one per CPU core). This process, the *owner*, opens the
SQLite file (frontier and store) as an embedded crawl always does, seeds it and works it with
its own in-process worker, exactly as `crawlq.engine.crawl.Crawl`. Once the queue holds
`START_AT_QUEUED` requests or more, it serves its frontier and store on a private socket
(`crawlq.engine.owner_server`) and starts the other worker processes (``crawlq local-worker``,
`crawlq.engine.owner_client`): each is the ordinary worker loop, fetching and parsing on a core
of its own, whose frontier and store calls are answered by this process. A crawl that never
queues that many URLs (one page, a handful) never starts a process.

The invariants hold as in one process, because one process still decides everything the
frontier decides: leases (politeness, exact across processes), dedup, priorities; and writes
the store (upserts by fingerprint). A worker process killed with SIGKILL loses nothing: the
owner expires its leases when its connection closes and the others fetch them again. The
owner killed with SIGKILL leaves the crash-safe SQLite file (its leases are requeued by the
next run) and its workers stop when the socket closes: a re-run of the same command resumes.

Whether the owner keeps working once the others start (``owner_works``): measured on the
PostgreSQL manual (bench/RESULTS.md), it does: P - 1 worker processes beside it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from crawlq.engine.backends import Backends
from crawlq.engine.crawl import Crawl, CrawlReport, Progress
from crawlq.engine.multiprocess import counted_since
from crawlq.engine.outcome import WorkerCounters
from crawlq.engine.owner_server import OwnerServer
from crawlq.errors import CrawlqError
from crawlq.settings import Settings
from crawlq.spider import Spider
from crawlq.store import StoreCounts

__all__ = ["START_AT_QUEUED", "LocalProcessesCrawl", "default_processes"]

logger = logging.getLogger(__name__)

START_AT_QUEUED = 32
"""Requests queued at which the other worker processes start (none start before)."""

_WATCH_S = 0.2


def default_processes() -> int:
    """The processes an embedded crawl uses by default: the CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class LocalProcessesCrawl(Crawl):
    """An embedded crawl worked by this process and ``processes - 1`` others (module docstring).

    Args:
        settings: The crawl settings (no ``frontier``).
        seeds: As `Crawl`.
        spider_cls: As `Crawl`; the worker processes load ``settings.spider`` (the same).
        processes: Processes in all, this one included (>= 2).
        child_args: Extra ``crawlq local-worker`` arguments (verbosity, log format).
        retry_dead: As `Crawl`.
        sitemaps: As `Crawl`.
        start_at_queued: Requests queued at which the others start.
        owner_works: This process keeps its own worker once the others run (then
            ``processes - 1`` others); else it stops it and serves ``processes`` others.
    """

    def __init__(
        self,
        settings: Settings,
        seeds: Sequence[str] = (),
        spider_cls: type[Spider] = Spider,
        *,
        processes: int,
        child_args: Sequence[str] = (),
        retry_dead: bool = False,
        sitemaps: Sequence[str] = (),
        start_at_queued: int = START_AT_QUEUED,
        owner_works: bool = True,
    ) -> None:
        if processes < 2:
            raise ValueError(f"processes must be at least 2, got {processes}")
        super().__init__(settings, seeds, spider_cls, retry_dead=retry_dead, sitemaps=sitemaps)
        self.processes = processes
        self.child_args = list(child_args)
        self.start_at_queued = start_at_queued
        self.owner_works = owner_works
        self.procs: list[subprocess.Popen[bytes]] = []
        """The worker processes started (empty until the queue grew)."""
        self._server: OwnerServer | None = None
        self._stopped = False
        self._before = StoreCounts(pages=0, items=0, dead=0, filtered=0)
        self._backends: Backends | None = None

    def stop(self, *, force: bool = False) -> None:
        """Stop this process's worker and every worker process (SIGTERM; SIGKILL with force)."""
        self._stopped = True
        super().stop(force=force)
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL if force else signal.SIGTERM)

    async def progress(self) -> Progress | None:
        """As `Crawl.progress`; once others work, the pages counted are the store's gain."""
        if not self.procs or self._backends is None:
            return await super().progress()
        store = await self._backends.store.counts()
        return Progress(
            frontier=await self._backends.frontier.stats(),
            counters=counted_since(self._before, store, self._started),
            in_flight=0 if self.worker is None else self.worker.in_flight,
            elapsed_s=time.monotonic() - self._started,
        )

    async def _run(self, backends: Backends, on_start: Callable[[], None] | None) -> CrawlReport:
        self._backends = backends
        self._before = await backends.store.counts()
        self._server = OwnerServer(backends.frontier, backends.store, self._hello)
        await self._server.start()
        watch = asyncio.create_task(self._start_when_busy(backends))
        try:
            own = await super()._run(backends, on_start)
            codes = await self._wait_children()
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
            self.stop_children()
            await self._wait_children()
            await self._server.close()
        return await self._report(backends, own, codes)

    def _hello(self, pid: int) -> dict[str, Any]:
        """What a worker process gets first: the settings in force, the frontier's rules."""
        return {
            "settings": self.settings,
            "politeness": self._backends.frontier.politeness if self._backends else None,
            "bounds": self._backends.frontier.bounds if self._backends else None,
            "max_pages": None,
        }

    async def _start_when_busy(self, backends: Backends) -> None:
        """Start the others once the queue holds `start_at_queued` requests.

        Never with a page budget (``max_pages``): this process's worker keeps it exact.
        """
        if self.settings.max_pages is not None:
            return
        while True:
            stats = await backends.frontier.stats()
            if stats.queued >= self.start_at_queued:
                break
            await asyncio.sleep(_WATCH_S)
        if self._stopped:
            return
        self.start_children(self.processes - 1 if self.owner_works else self.processes)
        if not self.owner_works and self.worker is not None:
            self.worker.stop()  # its in-flight fetches finish and it releases the rest

    def start_children(self, count: int) -> None:
        """Start ``count`` worker processes on this crawl's socket."""
        assert self._server is not None
        argv = [sys.executable, "-m", "crawlq", "local-worker", "--socket", self._server.path]
        for _ in range(count):
            proc = subprocess.Popen([*argv, *self.child_args])
            self._server.allow(proc.pid)
            self.procs.append(proc)
        logger.info("started %d worker processes: %s", count, [p.pid for p in self.procs])

    def stop_children(self) -> None:
        """Ask every worker process still running to stop (SIGTERM)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    async def _wait_children(self) -> list[int]:
        while any(p.poll() is None for p in self.procs):
            await asyncio.sleep(0.1)
        return [int(p.returncode) for p in self.procs]

    async def _report(self, backends: Backends, own: CrawlReport, codes: list[int]) -> CrawlReport:
        """This process's report with the others' counters added and the final counts."""
        if not self.procs:
            return own
        assert self._server is not None
        frontier = await backends.frontier.stats()
        store = await backends.store.counts()
        for pid, report in sorted(self._server.reports.items()):
            logger.info("worker process %d stored %s pages", pid, report.get("pages"))
        reports = list(self._server.reports.values())
        full = len(reports) == len(self.procs)
        counters: WorkerCounters
        if full:
            counters = WorkerCounters.summed([own.counters.as_json(), *reports], self._started)
        else:
            counters = counted_since(self._before, store, self._started)
        failed = [c for c in codes if c not in (0, -signal.SIGTERM)]
        if failed:
            logger.warning("worker processes exited with %s", codes)
        if self._stopped:
            stopped_by = "stopped"
        elif frontier.pending == 0:
            stopped_by = "done"
        else:
            raise CrawlqError(
                f"worker processes exited with {codes} before the crawl was done; re-run the "
                "same command to resume"
            )
        return dataclasses.replace(
            own,
            stopped_by=stopped_by,
            counters=counters,
            store=store,
            frontier=frontier,
            elapsed_s=time.monotonic() - self._started,
            full_counters=full,
        )
