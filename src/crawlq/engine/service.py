"""Producer and consumer entry points for a (usually shared) frontier: seed it, work it.

``crawlq seed`` calls `seed` (`crawlq.engine.seeding`); ``crawlq worker`` runs a
`WorkerService`, and ``--processes P`` a `MultiProcessWorker` (``crawlq crawl --processes
P``: a `MultiProcessCrawl`; `crawlq.engine.multiprocess`). All open their backends through
`crawlq.engine.backends.open_backends`, so a shared job's settings are bound the same way
everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable

from crawlq.engine.backends import Backends, assembled_worker, open_backends
from crawlq.engine.crawl import CrawlReport, WorkerHost, counted_pages, job_counts
from crawlq.engine.outage import outage_logged, outage_wait_s
from crawlq.engine.plan import spider_scope
from crawlq.errors import (
    ConfigError,
    CrawlqError,
    FrontierUnavailable,
)
from crawlq.secrecy import redact
from crawlq.settings import Settings
from crawlq.spider import load_spider, new_spider

__all__ = ["PARENT_CHECK_S", "WorkerService"]

logger = logging.getLogger(__name__)


PARENT_CHECK_S = 0.5
"""Seconds between two checks, in a worker started by another crawlq process, that its parent
is still alive."""


class WorkerService(WorkerHost):
    """One worker process on a job: lease, fetch, parse, store, until stopped or done.

    Args:
        settings: This process's settings (the job's are bound when it starts).
        exit_when_done: Return once nothing is queued, delayed or in flight anywhere.
        max_pages: Pages this process stores at most in this run (its share of a
            ``--max-pages`` split between several processes), or None; the ``max_pages``
            setting (a total over the store) applies as well.
        parent_pid: The process that started this one (``crawlq crawl`` or ``crawlq worker
            --processes P``), or None. Once it is gone (even killed with SIGKILL, which it
            cannot forward), this worker stops gracefully, as on SIGTERM: checked every
            `PARENT_CHECK_S` seconds.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        exit_when_done: bool = False,
        max_pages: int | None = None,
        parent_pid: int | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.exit_when_done = exit_when_done
        self.max_pages = max_pages
        self.parent_pid = parent_pid
        self._stop_asked: bool | None = None  # a stop before the worker exists: its force
        self._stop_event: asyncio.Event | None = None  # set by stop(): ends a wait at start

    def stop(self, *, force: bool = False) -> None:
        """Ask the worker to stop (see `crawlq.engine.worker.Worker.stop`).

        A stop that comes before the worker is assembled is applied as soon as it is.
        """
        self._stop_asked = force or bool(self._stop_asked)
        if self._stop_event is not None:
            self._stop_event.set()
        super().stop(force=force)

    def parent_gone(self) -> bool:
        """True when this worker has a ``parent_pid`` and it is no longer its parent.

        A dead parent's children are re-parented (to init or a subreaper), so this holds even
        if the pid is reused by another process.
        """
        return self.parent_pid is not None and os.getppid() != self.parent_pid

    async def _watch_parent(self) -> None:
        """Stop gracefully once the parent is gone (it cannot forward a signal any more)."""
        while not self.parent_gone():
            await asyncio.sleep(PARENT_CHECK_S)
        logger.warning("parent process %d is gone: stopping", self.parent_pid)
        self.stop()

    async def run(self, on_start: Callable[[], None] | None = None) -> CrawlReport:
        """Bind the job, then work.

        Raises:
            ConfigError: The job has no allowed domains (nobody seeded it with ``crawlq
                seed`` or ``crawl``, and none were given): refusing to follow links to any
                host on the web.
        """
        self._started = time.monotonic()
        watch = None if self.parent_pid is None else asyncio.create_task(self._watch_parent())
        try:
            return await self._run(on_start)
        finally:
            if watch is not None:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch

    async def _run(self, on_start: Callable[[], None] | None) -> CrawlReport:
        """Open the backends, waiting with backoff while the frontier cannot be reached.

        A worker may start while Redis is restarting: it logs each attempt (naming the
        frontier, password redacted) and starts once Redis answers. Errors that waiting
        does not fix (a bad URL, refused credentials, a job never seeded) end it at once.
        """
        self._stop_event = asyncio.Event()
        failures = 0
        while True:
            opened = False
            try:
                async with open_backends(self.settings) as backends:
                    opened = True
                    return await self._work(backends, on_start)
            except FrontierUnavailable as exc:
                if opened:
                    raise
                failures += 1
                delay = outage_wait_s(failures)
                if outage_logged(failures):
                    logger.warning(
                        "frontier %s unavailable at start (%s); attempt %d, retrying in %.1fs",
                        redact(self.settings.frontier or ""),
                        exc,
                        failures,
                        delay,
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop_event.wait(), delay)
                if self._stop_asked is not None:
                    raise CrawlqError("stopped while waiting for the frontier") from exc

    async def _work(self, backends: Backends, on_start: Callable[[], None] | None) -> CrawlReport:
        """Run the worker on open backends and report (see `run`)."""
        s = self.settings = backends.settings
        spider_cls = load_spider(s.spider)
        spider = new_spider(spider_cls)
        scope = spider_scope(s, spider)
        if not scope.allowed_domains:  # crawlq.rules.scope.crawl_domains: a worker refuses
            raise ConfigError(
                "allowed_domains",
                f"job {s.job!r} has no allowed domains: seed it with `crawlq seed` or "
                "give --allow-domain",
            )
        budget = self.max_pages
        if s.max_pages is not None:
            left = max(0, s.max_pages - await counted_pages(backends.store, s))
            budget = left if budget is None else min(budget, left)
        async with assembled_worker(
            backends, spider, scope, exit_when_done=self.exit_when_done, max_pages=budget
        ) as worker:
            self.worker = worker
            self._frontier = backends.frontier
            if self._stop_asked is not None:
                worker.stop(force=self._stop_asked)
            if on_start is not None:
                on_start()
            try:
                await worker.run()
            finally:
                self._frontier = None
        mine = await job_counts(backends.store, s)
        return CrawlReport(
            stopped_by=worker.stopped_by or "done",
            counters=worker.counters,
            store=await backends.store.counts(),
            frontier=await backends.frontier.stats(),
            elapsed_s=time.monotonic() - self._started,
            seeded=0,
            job_pages=mine.pages if mine is not None else None,
            job_store=mine,
        )
