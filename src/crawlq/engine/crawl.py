"""Run a whole crawl in this process: open the backends, seed, work until done, report.

This is what ``crawlq crawl`` calls, and the Python API for the same thing::

    import asyncio
    from crawlq.engine.crawl import Crawl
    from crawlq.settings import Settings

    report = asyncio.run(Crawl(Settings.build(cli={"delay_s": 0}), ["http://127.0.0.1:8000/"]).run())
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from crawlq.engine.backends import Backends, assembled_worker, open_backends
from crawlq.engine.plan import CrawlPlan, plan_crawl
from crawlq.engine.progress import CrawlReport, WorkerHost, counted_pages, job_counts
from crawlq.engine.seed_hosts import new_private_seed_hosts, warn_private_seed_hosts
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.spider import Spider

__all__ = ["Crawl"]

logger = logging.getLogger(__name__)


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
        self._adopt(plan_crawl(settings, seeds, spider_cls, sitemaps=sitemaps), retry_dead)

    @classmethod
    def from_plan(cls, plan: CrawlPlan, *, retry_dead: bool = False) -> Crawl:
        """The crawl of a plan made already (`crawlq.engine.plan.plan_crawl`)."""
        crawl = cls.__new__(cls)
        crawl._adopt(plan, retry_dead)
        return crawl

    def _adopt(self, plan: CrawlPlan, retry_dead: bool) -> None:
        WorkerHost.__init__(self)
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
