"""What a crawlq task does inside a Celery worker, with no Celery in it.

A task carries one or more URLs of one job (`Entry`). `JobRuntime.run` takes them through
the pipeline both engines share (`crawlq.engine.step.process`: robots.txt, fetch, parse,
decide), then writes in the order that makes a crash at any point harmless: the store, the
discovered links (shared dedup, new tasks), retries and re-schedules, and only then the
settle (`crawlq.celery.runtime.writes`).

The Celery task is acknowledged after `run` returns; a worker killed before that has its task
delivered again, the URLs are fetched again, and the store's upserts absorb the repeat.

A Redis at its ``maxmemory`` refuses only new URLs: the tasks already sent take their
pending URLs, run, store and settle them, and the links their pages find are not followed
(``frontier_full``: counted and logged once a minute, `crawlq.engine.outage.FullFrontier`);
a ``scrape.delay`` task whose URL was never admitted is dropped with that reason.

Politeness: before each fetch the host's slot is taken in Redis; a host that is not ready
sends its URLs back for later (`crawlq.celery.runtime.host_slots`). The task's wire format is
`crawlq.celery.runtime.wire`.

One `Runtimes` per thread owns an asyncio event loop and a `JobRuntime` per job (fetcher,
robots.txt cache, spider, store, Redis connection), built on first use: after the fork in the
prefork pool, and once per thread in the threads pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
from collections import defaultdict
from collections.abc import Sequence

from crawlq.celery.runtime.config import dedup_redis_url
from crawlq.celery.runtime.heartbeat import Heartbeat, process_id
from crawlq.celery.runtime.host_slots import HostSlots
from crawlq.celery.runtime.refusals import Refusals
from crawlq.celery.runtime.state import TAKE_RUN, TAKE_UNSEEN, CeleryState
from crawlq.celery.runtime.wire import (
    Entry,
    Publish,
    TaskResult,
    deferred,
    dropped,
    duplicate,
    outcome_result,
)
from crawlq.celery.runtime.writes import write_outcomes
from crawlq.engine.deps import Deps
from crawlq.engine.job import bind_job
from crawlq.engine.outage import FullFrontier
from crawlq.engine.outcome import Kind, Outcome, internal_error
from crawlq.engine.plan import spider_scope
from crawlq.engine.step import process
from crawlq.errors import ConfigError, FrontierError, FrontierFull
from crawlq.fetch import Fetcher
from crawlq.frontier.redis.refusals import Refusal
from crawlq.request import CrawlRequest, Lease
from crawlq.robots import RobotsCache
from crawlq.rules.politeness import Politeness
from crawlq.rules.scope import Scope, crawl_domains
from crawlq.settings import Settings
from crawlq.spider import load_spider, spider_closed
from crawlq.spider.item_type import items_table_of
from crawlq.store import Store, open_store

__all__ = ["JobRuntime", "Runtimes", "unsupported"]

logger = logging.getLogger(__name__)


class JobRuntime:
    """Everything one worker thread needs to run one job's tasks. Build with `open`."""

    def __init__(
        self, settings: Settings, state: CeleryState, store: Store, deps: Deps, fetcher: Fetcher
    ) -> None:
        self.settings = settings
        self.state = state
        self.store = store
        self.deps = deps
        self.fetcher = fetcher
        self.worker_id = f"{process_id()}:{threading.get_ident()}"
        self.full = FullFrontier()
        """Links a Redis at its ``maxmemory`` refused (counted, logged once a minute)."""
        self._page_host_deps: dict[str, Deps] = {}  # host -> deps whose scope is that host

    @classmethod
    async def open(cls, base: Settings, job: str, *, expect_id: str | None = None) -> JobRuntime:
        """Connect to the job's Redis and store, adopting (or first storing) its settings.

        ``expect_id``: the job id this process joined before (`CeleryState.open`).

        Raises:
            JobGone: ``expect_id`` is given and the job is gone or replaced.
            ConfigError: No Redis for the job's state, or settings that conflict with the
                job's.
            FrontierUnavailable, StoreError: A backend cannot be opened.
        """
        url = dedup_redis_url(base)
        state = await CeleryState.open(url, job, expect_id=expect_id)
        try:
            settings = dataclasses.replace(base, job=job, frontier=url)
            settings = await bind_job(
                state.frontier(Politeness.from_settings(base)), settings, create=True
            )
            unsupported(settings)
            # a view with the job's rules, fixed from the start (a view is only the connection)
            frontier = state.frontier(Politeness.from_settings(settings))
            store = await open_store(settings.store, items_table=items_table_of(settings))
        except BaseException:
            await state.close()
            raise
        s = settings
        fetcher = Fetcher.from_settings(s, max_connections=max(s.concurrency, s.celery_batch))
        spider = load_spider(s.spider)()
        scope = spider_scope(s, spider)
        robots = RobotsCache.from_settings(fetcher, s, frontier) if s.obey_robots else None
        deps = Deps(s, fetcher, robots, spider, scope, frontier, frontier.politeness)
        Heartbeat.of_process(s.heartbeat_s).add(url, job)  # what says this process is alive
        return cls(settings, state, store, deps, fetcher)

    async def close(self) -> None:
        """Close the pipelines, the spider, the fetcher, the store and the Redis connection.

        The spider's ``closed("shutdown")`` (Scrapy's hook) runs after the pipelines close:
        a Celery worker process ends at its shutdown.
        """
        if self.deps.items is not None:
            with contextlib.suppress(Exception):
                await self.deps.items.close()
        await spider_closed(self.deps.spider, "shutdown")
        with contextlib.suppress(Exception):
            await self.fetcher.close()
        with contextlib.suppress(Exception):
            await self.store.close()
        await self.state.close()

    def _deps_for(self, request: CrawlRequest) -> Deps:
        """The job's deps, or with no domains at all, those whose scope is the page's host.

        See `crawlq.rules.scope.crawl_domains`: the page's own host is the seed host of its links.
        """
        if self.deps.scope.allowed_domains:
            return self.deps
        deps = self._page_host_deps.get(request.host)
        if deps is None:
            domains = crawl_domains((), (), (request.host,))
            scope = Scope.from_settings(self.settings, domains)
            deps = self._page_host_deps[request.host] = dataclasses.replace(self.deps, scope=scope)
        return deps

    async def run(self, entries: Sequence[Entry], publish: Publish) -> list[TaskResult]:
        """Run one task's URLs to their outcomes and write them (module docstring).

        Returns:
            One result per entry, in order (`crawlq.celery.runtime.wire`).

        Raises:
            FrontierUnavailable, StoreUnavailable: Redis or the store is down; nothing of this
                task is settled, so the caller sends the task again later.
            StoreError: The store refused the results for another reason.
        """
        rules = self.deps.scope.url_rules  # scrape.delay(url) gets the job's URL rules too
        entries = [dataclasses.replace(e, request=e.request.rewritten(rules)) for e in entries]
        retried = sum(1 for e in entries if e.retry)
        job = self.state.job
        results = {e.request.fingerprint: duplicate(e, job) for e in entries}
        todo = await self._take(entries, retried, results)
        if not todo:
            return list(results.values())
        # if this process dies now, its heartbeat goes stale and these URLs are sent again
        await self.state.start_task(self.worker_id, [e.request.fingerprint for e in todo])
        try:
            by_host: dict[str, list[Entry]] = defaultdict(list)
            for entry in todo:
                by_host[entry.request.host].append(entry)
            outcomes: list[tuple[Entry, Outcome]] = []
            later: list[tuple[Entry, float]] = []
            slots = HostSlots(self.state, self.settings, self.deps, self.worker_id, self._process)
            await asyncio.gather(
                *(slots.run(host, group, outcomes, later) for host, group in by_host.items())
            )
            await write_outcomes(
                self.state, self.store, self.settings, outcomes, later, publish, self.full
            )
        finally:
            with contextlib.suppress(FrontierError):
                await self.state.end_task(self.worker_id)
        for entry, outcome in outcomes:
            if outcome.kind is not Kind.RELEASE:  # robots.txt's sitemaps: the page comes later
                results[entry.request.fingerprint] = outcome_result(entry, outcome, job)
        for entry, wait in later:
            results[entry.request.fingerprint] = deferred(entry, job, wait)
        return [results[e.request.fingerprint] for e in entries]

    async def _take(
        self, entries: list[Entry], retried: int, results: dict[bytes, TaskResult]
    ) -> list[Entry]:
        """The entries to run: pending ones, and new ones admitted now (`CeleryState.take`).

        A new one (a ``scrape.delay`` task) that a Redis at its ``maxmemory`` cannot admit is
        not run: its result in ``results`` says ``frontier_full`` (logged as the refused
        links are).
        """
        fps = [e.request.fingerprint for e in entries]
        flags = await self.state.take(fps, retries_started=retried)
        unseen = [e for e, flag in zip(entries, flags, strict=True) if flag == TAKE_UNSEEN]
        admitted: set[bytes] = set()
        if unseen:
            budget = self.settings.max_pages_per_host
            try:
                got = await self.state.admit(
                    [(e.request, "task") for e in unseen], run=True, budget=budget
                )
            except FrontierFull as exc:
                self.full.refused_links(len(unseen), exc)
                for e in unseen:
                    results[e.request.fingerprint] = dropped(
                        e.request.url, self.state.job, f"{FullFrontier.reason}: {exc}"
                    )
            else:
                admitted = {e.request.fingerprint for e, ok in zip(unseen, got, strict=True) if ok}
        return [
            e
            for e, flag in zip(entries, flags, strict=True)
            if flag == TAKE_RUN or e.request.fingerprint in admitted
        ]

    async def _process(self, entry: Entry, token: str) -> Outcome:
        req = entry.request
        lease = Lease(token, req, entry.attempt, self.worker_id, 0)
        try:
            return await process(lease, self._deps_for(req))
        except FrontierError as exc:  # a redirect claim could not reach Redis: try again later
            logger.warning("frontier error while processing %s: %s", req.url, exc)
            return Outcome(lease, Kind.RETRY, retry_delay_s=1.0, reason="frontier_unavailable")
        except Exception as exc:
            return internal_error(lease, exc)


class Runtimes:
    """One thread's event loop and its `JobRuntime` per job (see the module docstring).

    Args:
        settings: The worker's settings (from the environment or the app's factory); a job's
            stored settings win for the job-level fields.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[tuple[asyncio.AbstractEventLoop, dict[str, JobRuntime]]] = []
        self._joined: dict[str, str] = {}  # job -> id this process joined: never recreated

    def _thread_state(self) -> tuple[asyncio.AbstractEventLoop, dict[str, JobRuntime]]:
        state: tuple[asyncio.AbstractEventLoop, dict[str, JobRuntime]] | None = getattr(
            self._local, "state", None
        )
        if state is None or state[0].is_closed():
            state = (asyncio.new_event_loop(), {})
            self._local.state = state
            with self._lock:
                self._all.append(state)
        return state

    def run(self, job: str, entries: Sequence[Entry], publish: Publish) -> list[TaskResult]:
        """Run one task's entries on this thread's loop (blocking until written).

        Returns one result per entry (`JobRuntime.run`).

        A job once joined by this process is never created again: after it is lost (a Redis
        restart without persistence, deleted keys), its tasks raise `crawlq.errors.JobGone`.

        Raises:
            ConfigError, FrontierUnavailable, StoreError, JobGone: See `JobRuntime.open` and
                `JobRuntime.run`.
        """
        loop, jobs = self._thread_state()
        runtime = jobs.get(job)
        if runtime is None:
            with self._lock:
                expect = self._joined.get(job)
            runtime = loop.run_until_complete(JobRuntime.open(self.settings, job, expect_id=expect))
            jobs[job] = runtime
            if runtime.state.job_id is not None:
                with self._lock:
                    self._joined.setdefault(job, runtime.state.job_id)
        try:
            return loop.run_until_complete(runtime.run(entries, publish))
        except FrontierError:
            # the connection may be broken: open a fresh one for the next task
            jobs.pop(job, None)
            loop.run_until_complete(runtime.close())
            raise

    def refuse(self, job: str, entries: Sequence[Entry], reason: str) -> list[int] | None:
        """Record in the job's Redis that this worker refuses ``job``, and why.

        `run` raised `ConfigError`; one refusal of each entry is counted too
        (`crawlq.celery.runtime.refusals.Refusals.refuse`).

        Returns:
            One verdict per entry (`crawlq.celery.runtime.refusals.REFUSED_RESEND`,
            ``REFUSED_DEAD``, ``REFUSED_SETTLED``), or None when the refusal cannot be recorded:
            this worker has no Redis for the job's state, or it does not answer (logged).
        """
        loop, _ = self._thread_state()
        try:
            return loop.run_until_complete(self._refuse(job, entries, reason))
        except (ConfigError, FrontierError) as exc:
            logger.warning("job %s: cannot record this worker's refusal: %s", job, exc)
            return None

    async def _refuse(self, job: str, entries: Sequence[Entry], reason: str) -> list[int]:
        with self._lock:
            expect = self._joined.get(job)
        state = await CeleryState.open(dedup_redis_url(self.settings), job, expect_id=expect)
        try:
            refusal = Refusal(process_id(), reason, state.clock.wall_ms())
            requests = [e.request for e in entries]
            return await Refusals(state).refuse(
                refusal, requests, self.settings.celery_max_refusals
            )
        finally:
            await state.close()

    def close(self) -> None:
        """Close every thread's runtimes and loops (at worker shutdown, from any thread)."""
        with self._lock:
            everything, self._all = self._all, []
        for loop, jobs in everything:
            if loop.is_closed() or loop.is_running():
                continue
            for runtime in jobs.values():
                with contextlib.suppress(Exception):
                    loop.run_until_complete(runtime.close())
            loop.close()


def unsupported(settings: Settings) -> None:
    """Refuse the settings the Celery engine does not implement (yet).

    Raises:
        ConfigError: ``max_pages``, ``warc_dir`` or ``bloom_capacity`` is set; the message
            names it.
    """
    for name in ("max_pages", "warc_dir", "bloom_capacity"):
        if getattr(settings, name, None) is not None:
            raise ConfigError(name, "is not supported by the Celery engine (yet)")
