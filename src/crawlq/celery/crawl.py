"""``crawlq crawl --engine celery``: seed a job as Celery tasks and wait until it is done.

The command stores the job's settings in Redis (as ``crawlq seed`` does, so that every Celery
worker adopts them), sends each new seed as a task, and then watches the job's counters: the
crawl is done when no admitted URL is pending any more (each one has a page, filtered or
dead-letter record in the store). By default it starts no worker: run ``celery -A crawlq.celery
worker`` where you like. With ``processes`` it also starts one local Celery worker with that
many pool processes, and stops it at the end.

A worker that refuses the job (its store, spider or a setting differs) is reported within about
a second, and the URLs it refused too often are stored as ``worker_refused`` dead letters
(`RefusalWatch`). The summary's items, drops, links not followed and retries of this run are the
job's run counters that the workers' settles added in Redis
(`crawlq.celery.runtime.writes.outcome_counts`), read at the start and at the end; its pages,
the store's gain. Stopping the local worker is bounded (`crawlq.celery.local_worker`); the
broker checks and the refusals' watch follow.

**The broker** as the crawl sees it: a wrong broker URL or login fails before anything is seeded
(`check_broker`); the tasks waiting in the job's queue are counted (`queued_tasks`); and a crawl
whose tasks no worker takes says so once (`NoWorkerWatch`). Broker URLs are shown without their
user and password (`broker_name`).

**Workers that refuse the job**: a worker whose store, spider or a job setting differs from the
job's refuses the job's tasks and records why in the job's Redis
(`crawlq.celery.tasks.deliver`). `RefusalWatch` is the waiting crawl's side: every
`REFUSALS_EVERY_S` it prints each new refusal once per worker and reason ("worker W refuses job
J: …; start workers with …"), and writes the URLs dead-lettered ``worker_refused`` (refused
``celery_max_refusals`` times) to the job's store, which the refusing worker could not (it
refuses that store), so the crawl ends with them counted as dead letters.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any

from crawlq.celery.local_worker import LocalWorker
from crawlq.celery.runtime.config import clamp_priority, dedup_redis_url, visibility_timeout_s
from crawlq.celery.runtime.jobs import unsupported
from crawlq.celery.runtime.refusals import Refusals, RefusedDead
from crawlq.celery.runtime.state import CeleryState
from crawlq.celery.runtime.state_values import Counts
from crawlq.celery.runtime.wire import Entry
from crawlq.celery.runtime.writes import run_counters
from crawlq.celery.tasks import make_app
from crawlq.engine.backends import open_backends
from crawlq.engine.crawl import CrawlReport, Progress, job_counts
from crawlq.engine.multiprocess import counted_since
from crawlq.engine.outage import CELERY_WATCH_CAP_S, outage_wait_s
from crawlq.engine.outcome import stored_job
from crawlq.engine.plan import new_private_seed_hosts, warn_private_seed_hosts
from crawlq.errors import BrokerUnavailable, ConfigError, CrawlqError, FrontierUnavailable
from crawlq.frontier import FrontierStats
from crawlq.records import DeadRecord
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.store import ResultBatch, Store, StoreCounts
from crawlq.urls import UrlRules

__all__ = [
    "NO_WORKER_WARN_S",
    "REFUSALS_EVERY_S",
    "REFUSED_REASON",
    "CeleryCrawl",
    "NoWorkerWatch",
    "RefusalWatch",
    "broker_name",
    "celery_settings",
    "check_broker",
    "dead_record",
    "error_detail",
    "queued_tasks",
]

POLL_S = 0.2
"""Seconds between two looks at the job's counters."""

ORPHANS_EVERY_S = 2.0
"""Seconds between two looks for the URLs of dead workers (`CeleryState.orphans`)."""

LATE_FACTOR = 1.5
"""A pending URL due longer ago than this many visibility timeouts has lost its task: a
re-delivery of a killed worker's task comes after one timeout, so this leaves it time."""

logger = logging.getLogger(__name__)


def celery_settings(settings: Settings) -> Settings:
    """``settings`` with ``frontier`` set to the Redis of the Celery engine's state.

    Raises:
        ConfigError: No broker, no Redis for the state (see
            `crawlq.celery.runtime.config.dedup_redis_url`), or a setting the Celery engine does not
            support (``max_pages``, ``warc_dir``, ``bloom_capacity``).
    """
    if not settings.broker_url:
        raise ConfigError("broker_url", "the Celery engine needs --broker URL (CRAWLQ_BROKER_URL)")
    unsupported(settings)
    return dataclasses.replace(settings, frontier=dedup_redis_url(settings))


class CeleryCrawl:
    """Seed a job on Celery and follow it until every URL is settled.

    Args:
        settings: The crawl's settings, with ``broker_url``, ``frontier`` and ``job`` set (see
            `celery_settings` and `crawlq.engine.crawl.Crawl`, which derives the job name).
        requests: Seed requests.
        processes: Start a local ``celery worker`` with this many pool processes (None: none,
            the user runs workers).
        loglevel: The local worker's log level.
    """

    def __init__(
        self,
        settings: Settings,
        requests: Sequence[CrawlRequest],
        *,
        processes: int | None = None,
        loglevel: str = "WARNING",
    ) -> None:
        if not settings.broker_url or not settings.frontier or not settings.job:
            raise ConfigError("broker_url", "the Celery engine needs a broker, a Redis and a job")
        if processes is not None and processes < 1:
            raise ConfigError("processes", f"must be at least 1, got {processes}")
        self.settings = settings
        self.requests = list(requests)
        self.processes = processes
        self.loglevel = loglevel
        self._state: CeleryState | None = None
        self._store: Store | None = None
        self._before = StoreCounts(pages=0, items=0, dead=0, filtered=0)
        self._stop = asyncio.Event()
        self._worker = None if processes is None else LocalWorker(processes, loglevel)
        self._app: Any = None
        self._refusals: RefusalWatch | None = None
        self._started = time.monotonic()

    def stop(self, *, force: bool = False) -> None:
        """Stop waiting (the job's tasks stay in the broker; re-running resumes).

        The local worker, if any, stops taking tasks now (warm shutdown); its running tasks
        get `STOP_GRACE_S` to finish, or none with ``force``, and are then cancelled and sent
        back to the queue (cold shutdown; see the module docstring).
        """
        self._stop.set()
        if self._worker is not None:
            self._worker.stop(force=force)

    async def progress(self) -> Progress | None:
        """The job's counters and the pages stored since the start."""
        if self._state is None or self._store is None:
            return None
        counts = await self._state.counts()
        stored = await self._store.counts()
        return Progress(
            frontier=_stats(counts),
            counters=counted_since(self._before, stored, self._started),
            in_flight=0,
            elapsed_s=time.monotonic() - self._started,
        )

    async def run(self) -> CrawlReport:
        """Seed, wait until nothing is pending (or `stop`), report.

        Raises:
            ConfigError: Settings conflict with the job's.
            FrontierUnavailable, StoreError: Redis or the store cannot be opened.
            CrawlqError: The local worker exited before the crawl was done.
        """
        self._started = time.monotonic()
        check_broker(self.settings)  # before the job is created with these settings
        async with open_backends(self.settings, create=True, runs_spider=False) as backends:
            s = backends.settings
            assert s.frontier is not None and s.job is not None  # set by the constructor
            warn_private_seed_hosts(s, await new_private_seed_hosts(self.settings, s))
            state = await CeleryState.open(s.frontier, s.job)
            try:
                self._state, self._store = state, backends.store
                self._before = await backends.store.counts()
                run_before = await state.run_counts()  # the job's earlier runs
                self.settings = s
                self._app = make_app(s)
                seeded = await self._seed(state, s)
                if self._worker is not None:
                    self._worker.start(s)
                self._refusals = RefusalWatch(state, backends.store, s)
                stopped = await self._wait(state)
                await self._refusals.look(now=True)  # the last worker_refused dead letters
                counts = await self._final_counts(state)
                run_now = await self._run_counts(state)
            finally:
                self._state = self._store = None
                await state.close()
                if self._app is not None:
                    self._app.close()
                    self._app = None
                if self._worker is not None:
                    await self._worker.shutdown()
            store = await backends.store.counts()
            mine = await job_counts(backends.store, s)
        pages = counted_since(self._before, store)
        return CrawlReport(
            stopped_by="stopped" if stopped else "done",
            counters=pages if run_now is None else run_counters(run_now, run_before, pages=pages),
            store=store,
            frontier=_stats(counts),
            elapsed_s=time.monotonic() - self._started,
            seeded=seeded,
            full_counters=run_now is not None,
            round_trips=False,
            job_pages=None if mine is None else mine.pages,
            job_store=mine,
        )

    async def _seed(self, state: CeleryState, settings: Settings) -> int:
        rules = UrlRules(settings.strip_url_params)  # the job's, as for its links
        self.requests = [r.rewritten(rules) for r in self.requests]
        flags = await state.admit(
            [(r, "seed") for r in self.requests], run=False, budget=settings.max_pages_per_host
        )
        new = [r for r, ok in zip(self.requests, flags, strict=True) if ok]
        self._send(new)
        return len(new)

    def _send(self, requests: Sequence[CrawlRequest]) -> None:
        """Send each request as a task of its own."""
        if not requests:
            return
        assert self._app is not None
        for request in requests:
            try:
                self._app.crawlq.scrape_many.apply_async(
                    args=[self.settings.job, [Entry(request).to_wire()]],
                    priority=clamp_priority(request.priority),
                )
            except Exception as exc:  # kombu/amqp connection and login errors
                raise BrokerUnavailable(broker_name(self.settings), error_detail(exc)) from exc

    async def _wait(self, state: CeleryState) -> bool:
        """Return False when the crawl is done, True when stopped.

        Meanwhile, sends again the URLs of dead workers (`CeleryState.orphans`: their
        heartbeat is older than ``worker_stale_s``) and the pending URLs whose task is lost
        (`CeleryState.stale`: due longer ago than ``LATE_FACTOR`` visibility timeouts). A
        Redis or broker outage pauses the wait (logged, retried with backoff), as it pauses
        the workers, instead of ending the crawl.
        """
        late_s = LATE_FACTOR * visibility_timeout_s(self.settings)
        every_s = min(30.0, max(1.0, late_s / 4))
        next_look = time.monotonic() + every_s
        orphans_every_s = max(0.2, min(ORPHANS_EVERY_S, self.settings.heartbeat_s))
        next_orphans = time.monotonic() + orphans_every_s
        unsent: list[CrawlRequest] = []  # taken from dead workers, not yet sent (broker down)
        failures = outages = 0
        idle = NoWorkerWatch(time.monotonic())
        while not self._stop.is_set():
            try:
                counts = await state.counts()
                if counts.pending == 0:
                    return False
                await idle.look(self.settings, self._app, state, counts)
                if self._refusals is not None:
                    await self._refusals.look()
                if time.monotonic() >= next_orphans:
                    next_orphans = time.monotonic() + orphans_every_s
                    unsent += await state.orphans(self.settings.worker_stale_s)
                if unsent:
                    logger.warning(
                        "sending %d URLs again: their worker's heartbeat is over %.0fs old",
                        len(unsent),
                        self.settings.worker_stale_s,
                    )
                    self._send(unsent)
                    unsent = []
                if (state.dead_workers or outages) and late_s > self.settings.worker_stale_s:
                    # a dead worker also held tasks it had reserved (countdowns), and a worker
                    # that lost its broker connection drops them: the broker returns them only
                    # after its visibility timeout, so look for their URLs now
                    late_s = self.settings.worker_stale_s
                    every_s = orphans_every_s
                    next_look = min(next_look, time.monotonic() + every_s)
                if time.monotonic() >= next_look:
                    next_look = time.monotonic() + every_s
                    # only with nothing queued: a task still waiting behind a backlog is late,
                    # not lost, and re-sending it would snowball the backlog
                    queued = queued_tasks(self._app, self.settings)
                    lost = await state.stale(late_s) if queued == 0 else []
                    if lost:
                        logger.warning(
                            "sending %d URLs again: pending with no task for %.0fs",
                            len(lost),
                            late_s,
                        )
                        self._send(lost)
                        await state.reschedule([r.fingerprint for r in lost], 0.0)
                if failures:
                    logger.warning("Redis and the broker answer again after %d tries", failures)
                failures = 0
            except FrontierUnavailable as exc:  # BrokerUnavailable too
                failures += 1
                outages += failures == 1
                delay = outage_wait_s(failures, CELERY_WATCH_CAP_S)
                logger.warning("%s; still waiting, next try in %.1fs", exc, delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
                continue
            code = None if self._worker is None else self._worker.exit_code()
            if code is not None and not self._stop.is_set():
                raise CrawlqError(
                    f"the local celery worker exited with {code} before the crawl was done"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), POLL_S)
        return True

    async def _run_counts(self, state: CeleryState) -> dict[str, int] | None:
        """The job's run counters at the end (`CeleryState.run_counts`), or None.

        None when Redis does not answer now: the summary then has the store's counts only.
        """
        try:
            return await state.run_counts()
        except FrontierUnavailable as exc:
            logger.warning("%s; the summary counts only what the store gained", exc)
            return None

    async def _final_counts(self, state: CeleryState) -> Counts:
        """The job's counts at the end, waiting out a Redis outage (unless stopped again)."""
        failures = 0
        while True:
            try:
                return await state.counts()
            except FrontierUnavailable as exc:
                failures += 1
                if failures > 3 and self._stop.is_set():
                    raise
                delay = outage_wait_s(failures, CELERY_WATCH_CAP_S)
                logger.warning("%s; next try in %.1fs", exc, delay)
                await asyncio.sleep(delay)


def _stats(counts: Counts) -> FrontierStats:
    return FrontierStats(
        queued=max(0, counts.pending - counts.delayed),
        in_flight=0,
        delayed=counts.delayed,
        done=counts.done,
        dead=counts.dead,
        seen=counts.seen,
        over_budget=counts.over_budget,
        frontier_full=counts.frontier_full,
    )


# -- the broker as the crawl sees it ------------------------------------------------------------

NO_WORKER_WARN_S = 10.0
"""Seconds after which a crawl whose tasks no worker takes says so (once): no URL settled,
no worker heartbeat for the job, and tasks waiting in the broker's queue."""


class NoWorkerWatch:
    """Says once, after `NO_WORKER_WARN_S`, that no Celery worker takes the job's tasks.

    Without it, ``crawl --engine celery`` with no worker consuming its queue (none started,
    or one listening to another queue or broker) would wait silently forever. Once workers
    show up, it says so too.
    """

    def __init__(self, started_s: float) -> None:
        self.started_s = started_s
        self.settled: int | None = None
        self.warned = False

    async def look(self, settings: Settings, app: Any, state: CeleryState, counts: Counts) -> None:
        """Check, at most every poll; logs a warning (or, after one, the recovery) once.

        Args:
            settings: The job's settings (its broker, queue and ``worker_stale_s``).
            app: The command's Celery app (to count the queue's tasks).
            state: The job's Redis state (the workers' heartbeats).
            counts: The job's counts now.
        """
        settled = counts.done + counts.dead
        if self.settled is None:
            self.settled = settled
        if self.warned:
            if settled > self.settled:
                logger.warning("a Celery worker is taking the job's tasks now")
                self.warned = False
                self.started_s = time.monotonic()
                self.settled = settled
            return
        if settled > self.settled:  # work is done: someone consumes
            self.started_s, self.settled = time.monotonic(), settled
            return
        if time.monotonic() - self.started_s < NO_WORKER_WARN_S:
            return
        self.started_s = time.monotonic()  # look again one period later
        if await state.live_workers(settings.worker_stale_s) > 0:
            return
        waiting = queued_tasks(app, settings)
        if waiting == 0:
            return
        s = settings
        logger.warning(
            "no Celery worker has taken a task of job %s for %.0fs: %d tasks wait in queue %r "
            "on %s. Start workers: CRAWLQ_BROKER_URL=%s celery -A crawlq.celery worker -Q %s "
            "(or re-run this command with --processes P to start one here)",
            s.job,
            NO_WORKER_WARN_S,
            waiting,
            s.celery_queue,
            broker_name(s),
            broker_name(s),
            s.celery_queue,
        )
        self.warned = True


def broker_name(settings: Settings) -> str:
    """The broker URL without its user and password."""
    url = settings.broker_url or "?"
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else url


def error_detail(exc: BaseException) -> str:
    """A broker client's error on one line, at most 300 characters, its type named."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def check_broker(settings: Settings) -> None:
    """Connect to the broker once, so a wrong URL or login fails before anything is seeded.

    Raises:
        BrokerUnavailable: The broker cannot be reached or refused the login.
    """
    app = make_app(settings)
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=5)
    except Exception as exc:  # kombu OperationalError, amqp AccessRefused, OSError...
        raise BrokerUnavailable(broker_name(settings), error_detail(exc)) from exc
    finally:
        app.close()


def queued_tasks(app: Any, settings: Settings) -> int:
    """Tasks waiting in the broker's queue now (all priorities; 0 if it does not exist).

    Raises:
        BrokerUnavailable: The broker cannot be reached.
    """
    try:
        with app.connection_for_read() as conn:
            channel = conn.default_channel
            try:
                declared = channel.queue_declare(settings.celery_queue, passive=True)
            except conn.connection_errors:
                raise
            except Exception:  # the broker says the queue does not exist (yet): none queued
                return 0
            return int(declared.message_count)
    except Exception as exc:  # kombu/amqp/redis connection errors
        raise BrokerUnavailable(broker_name(settings), error_detail(exc)) from exc


# -- workers that refuse the job -----------------------------------------------------------------

REFUSALS_EVERY_S = 1.0
"""Seconds between two looks at the job's refusals."""

REFUSED_REASON = "worker_refused"
"""Dead-letter reason of a URL whose task workers refused ``celery_max_refusals`` times."""

REFUSALS_SINCE_SLACK_MS = 5_000
"""Refusals up to this long before the crawl started are shown too (clocks differ)."""


def dead_record(found: RefusedDead, job: str) -> DeadRecord:
    """The store's dead letter of a URL dead-lettered ``worker_refused``."""
    req, r = found.request, found.refusal
    detail = f"worker {r.worker} refuses job {job} ({found.refusals} refusals): {r.reason}"
    return DeadRecord(
        req.record_fingerprint, req.url, REFUSED_REASON, detail, 0, req.depth, r.at_ms / 1000,
        req.referrer,
    )  # fmt: skip


class RefusalWatch:
    """Print a job's refusals and store its ``worker_refused`` dead letters (module docstring).

    Args:
        state: The job's Redis state.
        store: The job's store.
        settings: The crawl's settings (``job``, ``frontier``).
    """

    def __init__(self, state: CeleryState, store: Store, settings: Settings) -> None:
        self.state = state
        self.refusals = Refusals(state)
        self.store = store
        self.settings = settings
        self.since_ms = state.clock.wall_ms() - REFUSALS_SINCE_SLACK_MS
        self._shown: set[tuple[str, str]] = set()
        self._next = 0.0

    async def look(self, *, now: bool = False) -> None:
        """Every `REFUSALS_EVERY_S` (or ``now``): print new refusals, store refused dead letters.

        Raises:
            FrontierUnavailable, StoreError: Redis or the store failed (the caller waits).
        """
        if not now and time.monotonic() < self._next:
            return
        self._next = time.monotonic() + REFUSALS_EVERY_S
        for r in await self.refusals.refusals():
            key = (r.worker, r.reason)
            if r.at_ms < self.since_ms or key in self._shown:
                continue
            self._shown.add(key)
            logger.error(
                "worker %s refuses job %s: %s; start workers with the job's settings "
                "(`crawlq job settings %s`), or stop that worker: a URL it refuses %d times "
                "is dead-lettered %s",
                r.worker,
                self.state.job,
                r.reason,
                self.state.job,
                self.settings.celery_max_refusals,
                REFUSED_REASON,
            )
        await self.store_dead()

    async def store_dead(self) -> int:
        """Write the ``worker_refused`` dead letters waiting in Redis to the store.

        Returns:
            How many were written.
        """
        written = 0
        while True:
            found = await self.refusals.refused_dead()
            if not found:
                return written
            records = [dead_record(f, self.state.job) for f in found]
            await self.store.write(ResultBatch(dead=records, job=stored_job(self.settings)))
            await self.refusals.forget_refused_dead([f.fingerprint for f in found])
            written += len(found)
