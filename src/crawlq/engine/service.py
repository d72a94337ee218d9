"""Producer and consumer entry points for a (usually shared) frontier: seed it, work it.

``crawlq seed`` calls `seed`; ``crawlq worker`` runs a `WorkerService`. Both open their
backends through `crawlq.engine.backends.open_backends`, so a shared job's settings are bound
the same way everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crawlq.engine.backends import Backends, assembled_worker, open_backends
from crawlq.engine.crawl import CrawlReport, Progress, WorkerHost, warn_private_seed_hosts
from crawlq.engine.job import new_private_seed_hosts
from crawlq.engine.outage import outage_wait_s, read_through_outage
from crawlq.engine.plan import plan_seed, spider_scope
from crawlq.engine.processes import WorkerProcesses
from crawlq.engine.worker import WorkerCounters
from crawlq.errors import (
    ConfigError,
    CrawlqError,
    FrontierError,
    FrontierUnavailable,
    QueueFullTimeout,
    SeedInterrupted,
)
from crawlq.frontier import Frontier
from crawlq.request import CrawlRequest
from crawlq.secrecy import redact
from crawlq.settings import Settings
from crawlq.spider import load_spider
from crawlq.store import Store, StoreCounts
from crawlq.urls import UrlRules

__all__ = [
    "PARENT_CHECK_S",
    "MultiProcessCrawl",
    "MultiProcessWorker",
    "SeedResult",
    "WorkerService",
    "counted_since",
    "seed",
]

logger = logging.getLogger(__name__)


SEED_CHUNK = 500
PUSH_RETRY_S = 0.5
"""How often a producer offers its waiting requests again while the frontier is full."""
"""Seed requests pushed per call: what `seed` can count as queued when the frontier fails
part way (the Redis frontier pushes at most this many in one script)."""

PARENT_CHECK_S = 0.5
"""Seconds between two checks, in a worker started by another crawlq process, that its parent
is still alive."""


@dataclass(frozen=True, slots=True)
class SeedResult:
    """What `seed` did.

    Attributes:
        given: Requests given.
        queued: Requests that were new to the job and are now queued.
        settings: The job's settings in force.
        private_hosts: Hosts of these seeds that the job's private-address guard will refuse
            (the job existed with other seed hosts and without ``allow_private``).
        replayed: Dead letters put back in the queue first (``retry_dead``).
    """

    given: int
    queued: int
    settings: Settings
    private_hosts: tuple[str, ...] = ()
    replayed: int = 0


async def seed(
    settings: Settings, requests: Sequence[CrawlRequest], *, retry_dead: bool = False
) -> SeedResult:
    """Push seed requests into the job's frontier (deduplicated), storing the job's settings.

    The job's settings are planned by `crawlq.engine.plan.plan_seed` (allowed domains: the
    settings', else the seeds' hosts). The seeds' hosts become the job's seed hosts
    (exempt from the private-address guard) when this call creates the job; on an existing
    job, seeds on other hosts that resolve to private addresses are logged as a warning and
    returned in `SeedResult.private_hosts`. With ``retry_dead`` the job's dead letters are
    requeued first.

    Raises:
        ConfigError: Settings conflict with the job's, or no job name on a shared frontier.
        FrontierUnavailable: The frontier cannot be reached.
        SeedInterrupted: The frontier failed (Redis at its maxmemory: `FrontierFull`, or an
            outage) after the job was opened; it says how many requests were queued before
            (``queued``). Re-running the same seed resumes: queued ones are skipped.
    """
    settings = plan_seed(settings, requests)
    async with open_backends(settings, create=True, runs_spider=False) as backends:
        private = await new_private_seed_hosts(settings, backends.settings)
        warn_private_seed_hosts(backends.settings, private)
        replayed = await backends.frontier.replay_dead() if retry_dead else 0
        rules = UrlRules(backends.settings.strip_url_params)  # the job's, as for its links
        requests = [r.rewritten(rules) for r in requests]
        queued = 0
        try:
            for start in range(0, len(requests), SEED_CHUNK):
                chunk = list(requests[start : start + SEED_CHUNK])
                waited_since: float | None = None
                while True:
                    offer = await backends.frontier.offer(chunk)
                    queued += offer.queued
                    if not offer.refused:
                        break
                    waited_since = _room_wait(waited_since, backends.settings, queued)
                    await asyncio.sleep(PUSH_RETRY_S)
                if waited_since is not None:
                    logger.warning("frontier has room again: seeding goes on")
        except FrontierError as exc:
            raise SeedInterrupted(queued, len(requests), exc) from exc
        return SeedResult(len(requests), queued, backends.settings, tuple(private), replayed)


def _room_wait(waited_since: float | None, settings: Settings, queued: int) -> float:
    """Note a wait for room in a full frontier (`QueueBounds` ``block``); say so once.

    Returns when the wait began (monotonic seconds).

    Raises:
        QueueFullTimeout: The frontier has stayed full for ``max_push_wait_s``.
    """
    now = time.monotonic()
    if waited_since is None:
        logger.warning(
            "frontier full (max_queued %s, per host %s): waiting for workers to make room;"
            " %d queued so far",
            settings.max_queued,
            settings.max_queued_per_host,
            queued,
        )
        waited_since = now
    limit = settings.max_push_wait_s
    if limit is not None and now - waited_since >= limit:
        raise QueueFullTimeout(limit, settings.max_queued)
    return waited_since


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
        spider = spider_cls()
        scope = spider_scope(s, spider)
        if not scope.allowed_domains:  # crawlq.scope.crawl_domains: a worker refuses
            raise ConfigError(
                "allowed_domains",
                f"job {s.job!r} has no allowed domains: seed it with `crawlq seed` or "
                "give --allow-domain",
            )
        budget = self.max_pages
        if s.max_pages is not None:
            left = max(0, s.max_pages - (await backends.store.counts()).pages)
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
        return CrawlReport(
            stopped_by=worker.stopped_by or "done",
            counters=worker.counters,
            store=await backends.store.counts(),
            frontier=await backends.frontier.stats(),
            elapsed_s=time.monotonic() - self._started,
            seeded=0,
        )


class MultiProcessCrawl:
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
        self.pool = WorkerProcesses(
            ["--job", settings.job, "--exit-when-done", "--processes", "1", *worker_args],
            processes,
            {"CRAWLQ_FRONTIER": settings.frontier},  # not argv: it may hold a password
        )
        self._frontier: Frontier | None = None
        self._store: Store | None = None
        self._before = StoreCounts(pages=0, items=0, dead=0, filtered=0)
        self._stopped = False
        self._started = time.monotonic()

    def stop(self, *, force: bool = False) -> None:
        """Forward the stop to every child (SIGTERM, or SIGKILL with ``force``)."""
        self._stopped = True
        self.pool.stop(force=force)

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
            limit, store_ = self.settings.max_pages, backends.store
            budget_spent = False

            async def spent() -> bool:  # --max-pages: the children share one store total
                nonlocal budget_spent
                budget_spent = limit is not None and (await store_.counts()).pages >= limit
                return budget_spent

            if limit is not None:
                # Each child gets its share of the budget (the parent also stops them all
                # once the store holds `limit` pages, whoever stored them).
                share = -(-max(0, limit - self._before.pages) // self.pool.count)
                self.pool.args += ["--page-budget", str(share)]
            # The job keeps no store password: the children get this process's store URL
            # (equal to the job's but for the password) through their environment.
            self.pool.env["CRAWLQ_STORE"] = backends.settings.store
            # Code and local paths come from this command's own options, never the job's.
            given = self.settings
            if given.spider is not None and "spider" in given.explicit:
                self.pool.env["CRAWLQ_SPIDER"] = given.spider
            if given.warc_dir is not None and "warc_dir" in given.explicit:
                self.pool.env["CRAWLQ_WARC_DIR"] = given.warc_dir
            if given.trust_job_code:
                self.pool.env["CRAWLQ_TRUST_JOB_CODE"] = "1"
            self.pool.start()
            try:
                codes = await self.pool.wait(spent if limit is not None else None)
            finally:
                self._frontier = self._store = None
            store = await read_through_outage(backends.store.counts)
            frontier = await read_through_outage(backends.frontier.stats)
            budget_left_work = limit is not None and frontier.pending > 0  # shares spent
            failed = [c for c in codes if c not in (0, 1, -15)]
            # A child killed mid-crawl loses nothing: its leases expire and the others
            # finish them. The job is done when nothing is left, whatever the exit codes.
            finished = all(c == 0 for c in codes) or (bool(failed) and frontier.pending == 0)
            if budget_spent or (limit is not None and store.pages >= limit):
                stopped_by = "max_pages"
            elif finished and not self._stopped:
                stopped_by = "max_pages" if budget_left_work else "done"
            else:
                stopped_by = "stopped"
            report = CrawlReport(
                stopped_by=stopped_by,
                counters=counted_since(self._before, store),
                store=store,
                frontier=frontier,
                elapsed_s=time.monotonic() - self._started,
                seeded=seeded.queued,
                full_counters=False,
                replayed=seeded.replayed,
            )
        if failed and stopped_by == "stopped":
            raise CrawlqError(
                f"worker processes exited with {codes} before the job was done; re-run the "
                "same command to resume"
            )
        if failed:
            logger.warning("worker processes exited with %s; the others finished the job", codes)
        return report


class MultiProcessWorker:
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
        self.pool = WorkerProcesses([*worker_args, "--processes", "1"], processes, env)
        self._frontier: Frontier | None = None
        self._store: Store | None = None
        self._before = StoreCounts(pages=0, items=0, dead=0, filtered=0)
        self._stopped = False
        self._started = time.monotonic()

    def stop(self, *, force: bool = False) -> None:
        """Forward the stop to every child (SIGTERM, or SIGKILL with ``force``)."""
        self._stopped = True
        self.pool.stop(force=force)

    async def progress(self) -> Progress | None:
        """Frontier counts and what the store gained since the start, for all children."""
        if self._frontier is None or self._store is None:
            return None
        return Progress(
            frontier=await self._frontier.stats(),
            counters=counted_since(self._before, await self._store.counts(), self._started),
            in_flight=0,
            elapsed_s=time.monotonic() - self._started,
        )

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
            store = await read_through_outage(backends.store.counts)
            frontier = await read_through_outage(backends.frontier.stats)
        failed = [c for c in codes if c not in (0, -15)]
        if failed and not self._stopped:
            raise CrawlqError(f"worker processes exited with {codes}")
        done = self.exit_when_done and not self._stopped and frontier.pending == 0
        return CrawlReport(
            stopped_by="done" if done else "stopped",
            counters=counted_since(self._before, store),
            store=store,
            frontier=frontier,
            elapsed_s=time.monotonic() - self._started,
            seeded=0,
            full_counters=False,
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
