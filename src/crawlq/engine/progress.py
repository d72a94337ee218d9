"""What a running crawl shows (`Progress`), how a run ended (`CrawlReport`), and `WorkerHost`.

Every runner of the CLI (`crawlq.engine.crawl.Crawl`, `crawlq.engine.service.WorkerService`,
the multi-process runners of `crawlq.engine.multiprocess`, `crawlq.celery.crawl.CeleryCrawl`)
offers ``progress()`` for a live display and returns a `CrawlReport`; the two in-process
runners share `WorkerHost`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from crawlq.engine.outcome import stored_job
from crawlq.engine.worker import Worker, WorkerCounters
from crawlq.frontier import Frontier, FrontierStats
from crawlq.settings import Settings
from crawlq.store import Store, StoreCounts

__all__ = ["CrawlReport", "Progress", "WorkerHost", "counted_pages", "job_counts", "job_pages"]


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
