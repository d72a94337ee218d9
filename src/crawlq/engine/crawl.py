"""A crawl run in this process (`Crawl`), what a run shows (`Progress`) and how it ended.

`Crawl` is what ``crawlq crawl`` calls, and the Python API for the same thing: open the
backends, seed, work until done, report::

    import asyncio
    from crawlq.engine.crawl import Crawl
    from crawlq.settings import Settings

    report = asyncio.run(Crawl(Settings.build(cli={"delay_s": 0}), ["http://127.0.0.1:8000/"]).run())

Every runner of the CLI (`Crawl`, `crawlq.engine.service.WorkerService`, the multi-process
runners of `crawlq.engine.multiprocess`, `crawlq.celery.crawl.CeleryCrawl`) offers
``progress()`` for a live display (`Progress`) and returns a `CrawlReport`; the two in-process
runners share `WorkerHost`. `counted_pages`, `job_counts` and `job_pages` read what a run
counts from the store (the shared job's share, or the whole store of an embedded crawl).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crawlq.engine.backends import Backends, assembled_worker, open_backends
from crawlq.engine.outcome import WorkerCounters, stored_job
from crawlq.engine.plan import new_private_seed_hosts, plan_crawl, warn_private_seed_hosts
from crawlq.engine.worker import Worker
from crawlq.frontier import Frontier, FrontierStats
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.spider import Spider
from crawlq.store import Store, StoreCounts

__all__ = [
    "Crawl",
    "CrawlReport",
    "Progress",
    "WorkerHost",
    "counted_pages",
    "job_counts",
    "job_pages",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Progress:
    """A snapshot for a live display.

    Attributes:
        frontier: Frontier counts now.
        counters: This run's worker counters.
        in_flight: Fetches running in this process.
        elapsed_s: Seconds since the run started.
    """

    frontier: FrontierStats
    counters: WorkerCounters
    in_flight: int
    elapsed_s: float

    @property
    def pages_per_s(self) -> float:
        """Pages stored per second in this run."""
        return self.counters.pages / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class CrawlReport:
    """How a crawl run ended.

    Attributes:
        stopped_by: ``done`` (nothing left anywhere), ``max_pages`` or ``stopped`` (signal).
        counters: What this run did.
        store: Totals in the store, earlier runs included.
        frontier: Frontier counts at the end.
        elapsed_s: Wall seconds of this run.
        seeded: Seed requests that were new to the frontier.
        full_counters: False when ``counters`` hold only the pages stored (the work was
            done by other processes: each worker reports its own links, retries and round
            trips).
        round_trips: False when ``counters.round_trips`` is not counted (the Celery engine's
            workers do not report theirs): the summary leaves that line out.
        replayed: Dead letters of earlier runs put back in the queue first (``retry_dead``).
        job_pages: Pages in the store that the shared job wrote (`job_pages`), fewer than
            ``store.pages`` when other jobs write to the store too; None for an embedded crawl.
        job_store: What the store holds of the shared job (`job_counts`: its pages, dead
            letters and filtered URLs, every run and worker of the job together); None for
            an embedded crawl, whose store is the crawl (``store``).
    """

    stopped_by: str
    counters: WorkerCounters
    store: StoreCounts
    frontier: FrontierStats
    elapsed_s: float
    seeded: int
    full_counters: bool = True
    round_trips: bool = True
    replayed: int = 0
    job_pages: int | None = None
    job_store: StoreCounts | None = None


async def job_pages(store: Store, settings: Settings) -> int | None:
    """Pages the crawl's shared job wrote to ``store`` (`CrawlReport.job_pages`).

    None for an embedded crawl (`crawlq.engine.outcome.stored_job`).

    Raises:
        StoreUnavailable, StoreError: As `crawlq.store.Store.counts`.
    """
    counts = await job_counts(store, settings)
    return None if counts is None else counts.pages


async def job_counts(store: Store, settings: Settings) -> StoreCounts | None:
    """What the crawl's shared job wrote to ``store`` (`CrawlReport.job_store`).

    None for an embedded crawl (`crawlq.engine.outcome.stored_job`).

    Raises:
        StoreUnavailable, StoreError: As `crawlq.store.Store.counts`.
    """
    job = stored_job(settings)
    return None if job is None else await store.counts(job=job)


async def counted_pages(store: Store, settings: Settings) -> int:
    """The pages ``--max-pages`` counts in ``store``: the shared job's, or the whole store's.

    A shared job (a Redis frontier, either engine) counts the pages it stored, earlier runs
    of it included, never another job's in a store they share. An embedded crawl's store
    (the SQLite file of its frontier) holds that one crawl, so every page in it counts: a
    crawl resumed on the same file goes on towards the same total.

    Raises:
        StoreUnavailable, StoreError: As `crawlq.store.Store.counts`.
    """
    mine = await job_counts(store, settings)
    return (mine if mine is not None else await store.counts()).pages


class WorkerHost:
    """What the crawl and worker entry points share: the running worker, stop and progress.

    Subclasses set ``worker`` and ``_frontier`` while their worker runs.
    """

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self._frontier: Frontier | None = None
        self._started = time.monotonic()

    def stop(self, *, force: bool = False) -> None:
        """Ask the running worker to stop (see `crawlq.engine.worker.Worker.stop`)."""
        if self.worker is not None:
            self.worker.stop(force=force)

    async def progress(self) -> Progress | None:
        """A snapshot of the frontier and this process's worker, or None before it runs."""
        if self.worker is None or self._frontier is None:
            return None
        return Progress(
            frontier=await self._frontier.stats(),
            counters=self.worker.counters,
            in_flight=self.worker.in_flight,
            elapsed_s=time.monotonic() - self._started,
        )


class Crawl(WorkerHost):
    """One crawl run on the embedded backends named by ``settings.store``.

    Args:
        settings: The crawl settings.
        seeds: Seed URLs; they replace the spider's ``start_urls`` when given.
        spider_cls: The spider class (default: follow every link).
        retry_dead: First put the dead letters of earlier runs back in the queue.
        sitemaps: Sitemap URLs to read (`crawlq.sitemap`); with ``seeds`` they replace the
            spider's ``start_urls`` and ``sitemap_urls`` when either is given. Their hosts
            count as seed hosts (scope and the private-address guard), as the seeds' do.

    Raises:
        InvalidURL: A seed URL cannot be crawled (raised by the constructor, before anything
            is opened, so a bad seed never touches the store).
        ConfigError: No seeds at all, or the spider's ``sitemap_rules``/``sitemap_follow``
            are wrong.
    """

    def __init__(
        self,
        settings: Settings,
        seeds: Sequence[str] = (),
        spider_cls: type[Spider] = Spider,
        *,
        retry_dead: bool = False,
        sitemaps: Sequence[str] = (),
    ) -> None:
        super().__init__()
        plan = plan_crawl(settings, seeds, spider_cls, sitemaps=sitemaps)
        self.retry_dead = retry_dead
        self.spider = plan.spider
        self.start_requests = plan.start_requests
        self.settings = plan.settings

    async def run(self, on_start: Callable[[], None] | None = None) -> CrawlReport:
        """Seed the frontier, then work until done, out of page budget, or stopped.

        Args:
            on_start: Called once the backends are open and the worker runs.

        Raises:
            FrontierLocked: Another crawl is using the same store file.
            FrontierUnavailable, StoreError: A backend cannot be opened.
        """
        self._started = time.monotonic()
        # runs_spider=False: this crawl runs its own spider class, never the job's
        async with open_backends(self.settings, create=True, runs_spider=False) as backends:
            if self.settings.frontier is not None:  # a shared job may have other seed hosts
                private = await new_private_seed_hosts(self.settings, backends.settings)
                warn_private_seed_hosts(backends.settings, private)
            self.settings = backends.settings
            try:
                return await self._run(backends, on_start)
            finally:
                self._frontier = None

    async def _run(self, backends: Backends, on_start: Callable[[], None] | None) -> CrawlReport:
        s = self.settings
        frontier, store = backends.frontier, backends.store
        self.scope = Scope.from_settings(s, s.allowed_domains)
        revived = 0
        if self.retry_dead:  # the replay of every dead letter (crawlq.ops.dead)
            # no wait at a block bound: this crawl's workers, not started yet, make the room
            replay = await frontier.replay_dead()
            revived = replay.queued
            logger.warning("requeued %d dead-lettered URLs (--retry-dead)", revived)
            if replay.refused:
                logger.warning(
                    "%d dead letters left dead: the frontier is full (max_queued %s, per host"
                    " %s); --retry-dead again once it has room",
                    replay.refused,
                    frontier.bounds.max_queued,
                    frontier.bounds.max_queued_per_host,
                )
        rules = self.scope.url_rules  # seeds too: no session id enters the crawl
        seeded = await frontier.push([r.rewritten(rules) for r in self.start_requests])
        budget = None
        if s.max_pages is not None:
            budget = max(0, s.max_pages - await counted_pages(store, s))
        async with assembled_worker(backends, self.spider, self.scope, max_pages=budget) as worker:
            self.worker = worker
            self._frontier = frontier
            if on_start is not None:
                on_start()
            await worker.run()
        mine = await job_counts(store, s)
        return CrawlReport(
            stopped_by=worker.stopped_by or "done",
            counters=worker.counters,
            store=await store.counts(),
            frontier=await frontier.stats(),
            elapsed_s=time.monotonic() - self._started,
            seeded=seeded,
            replayed=revived,
            job_pages=mine.pages if mine is not None else None,
            job_store=mine,
        )
