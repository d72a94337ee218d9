"""``crawlq crawl --engine celery``: seed a job as Celery tasks and wait until it is done.

The command stores the job's settings in Redis (as ``crawlq seed`` does, so that every Celery
worker adopts them), sends each new seed as a task, and then watches the job's counters: the
crawl is done when no admitted URL is pending any more (each one has a page, filtered or
dead-letter record in the store). By default it starts no worker: run ``celery -A crawlq.celery
worker`` where you like. With ``processes`` it also starts one local Celery worker with that
many pool processes, and stops it at the end.

Stopping the local worker is bounded. A task runs up to ``celery_batch`` URLs and, when its own
fetches hold the host's slots, fetches them one after another for up to ``timeout_s`` (30 s by
default); Celery's warm shutdown (SIGTERM) waits for running tasks, so it alone could take that
long. The worker gets SIGTERM first (it takes no new task, and its prefetched ones go back to
the queue), then, after `STOP_GRACE_S`, SIGQUIT: Celery's cold shutdown cancels the running
tasks, and their messages go back to the queue (``acks_late``, ``reject_on_worker_lost``).
Nothing is lost: a cancelled task settled none of its URLs (they stay pending in the job), and
its repeat is absorbed by the store's upserts. Only if the worker still runs `KILL_AFTER_S`
later is its process group killed; its unacknowledged tasks then come back after the broker's
visibility timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from crawlq.celery.config import clamp_priority, dedup_redis_url, visibility_timeout_s
from crawlq.celery.runtime import unsupported
from crawlq.celery.state import CeleryState, Counts
from crawlq.celery.tasks import make_app
from crawlq.celery.wire import Entry
from crawlq.engine.backends import open_backends
from crawlq.engine.crawl import CrawlReport, Progress, warn_private_seed_hosts
from crawlq.engine.job import new_private_seed_hosts
from crawlq.engine.outage import CELERY_WATCH_CAP_S, outage_wait_s
from crawlq.engine.service import counted_since
from crawlq.errors import BrokerUnavailable, ConfigError, CrawlqError, FrontierUnavailable
from crawlq.frontier import FrontierStats
from crawlq.request import CrawlRequest
from crawlq.secrecy import has_password
from crawlq.settings import Settings
from crawlq.store import Store, StoreCounts
from crawlq.urls import UrlRules

__all__ = ["CeleryCrawl", "celery_settings"]

POLL_S = 0.2
"""Seconds between two looks at the job's counters."""

STOP_GRACE_S = 2.0
"""Seconds the local worker has, after the first stop, to finish its running tasks (Celery's
warm shutdown) before they are cancelled and sent back to the queue (cold shutdown)."""

KILL_AFTER_S = 15.0
"""Seconds after the cold shutdown at which a local worker still running is killed."""

ORPHANS_EVERY_S = 2.0
"""Seconds between two looks for the URLs of dead workers (`CeleryState.orphans`)."""

NO_WORKER_WARN_S = 10.0
"""Seconds after which a crawl whose tasks no worker takes says so (once): no URL settled,
no worker heartbeat for the job, and tasks waiting in the broker's queue."""

LATE_FACTOR = 1.5
"""A pending URL due longer ago than this many visibility timeouts has lost its task: a
re-delivery of a killed worker's task comes after one timeout, so this leaves it time."""

logger = logging.getLogger(__name__)


def celery_settings(settings: Settings) -> Settings:
    """``settings`` with ``frontier`` set to the Redis of the Celery engine's state.

    Raises:
        ConfigError: No broker, no Redis for the state (see
            `crawlq.celery.config.dedup_redis_url`), or a setting the Celery engine does not
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
        self._worker: subprocess.Popen[bytes] | None = None
        self._stopping_since: float | None = None  # when the local worker got SIGTERM
        self._cold = False  # the local worker got SIGQUIT (a second one would be a hard kill)
        self._app: Any = None
        self._started = time.monotonic()

    def stop(self, *, force: bool = False) -> None:
        """Stop waiting (the job's tasks stay in the broker; re-running resumes).

        The local worker, if any, stops taking tasks now (warm shutdown); its running tasks
        get `STOP_GRACE_S` to finish, or none with ``force``, and are then cancelled and sent
        back to the queue (cold shutdown; see the module docstring).
        """
        self._stop.set()
        worker = self._worker
        if worker is None or worker.poll() is not None:
            return
        if force and not self._cold:
            self._cold = True
            worker.send_signal(signal.SIGQUIT)
        elif self._stopping_since is None:
            self._stopping_since = time.monotonic()
            worker.send_signal(signal.SIGTERM)

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
        _check_broker(self.settings)  # before the job is created with these settings
        async with open_backends(self.settings, create=True, runs_spider=False) as backends:
            s = backends.settings
            assert s.frontier is not None and s.job is not None  # set by the constructor
            warn_private_seed_hosts(s, await new_private_seed_hosts(self.settings, s))
            state = await CeleryState.open(s.frontier, s.job)
            try:
                self._state, self._store = state, backends.store
                self._before = await backends.store.counts()
                self.settings = s
                self._app = make_app(s)
                seeded = await self._seed(state, s)
                if self.processes is not None:
                    self._worker = self._start_worker(s)
                stopped = await self._wait(state)
                counts = await self._final_counts(state)
            finally:
                self._state = self._store = None
                await state.close()
                if self._app is not None:
                    self._app.close()
                    self._app = None
                await self._stop_worker()
            store = await backends.store.counts()
        return CrawlReport(
            stopped_by="stopped" if stopped else "done",
            counters=counted_since(self._before, store),
            store=store,
            frontier=_stats(counts),
            elapsed_s=time.monotonic() - self._started,
            seeded=seeded,
            full_counters=False,
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
                raise BrokerUnavailable(_broker_name(self.settings), _detail(exc)) from exc

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
        idle = _NoWorkerWatch(time.monotonic())
        while not self._stop.is_set():
            try:
                counts = await state.counts()
                if counts.pending == 0:
                    return False
                await idle.look(self, state, counts)
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
                    lost = await state.stale(late_s) if self._queued() == 0 else []
                    if lost:
                        logger.warning(
                            "sending %d URLs again: pending with no task for %.0fs",
                            len(lost),
                            late_s,
                        )
                        self._send(lost)
                        await state.due([r.fingerprint for r in lost], 0.0)
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
            worker = self._worker
            if worker is not None and worker.poll() is not None and not self._stop.is_set():
                raise CrawlqError(
                    f"the local celery worker exited with {worker.returncode} before "
                    "the crawl was done"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), POLL_S)
        return True

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

    def _queued(self) -> int:
        """Tasks waiting in the broker's queue now (all priorities; 0 if it does not exist)."""
        assert self._app is not None
        try:
            with self._app.connection_for_read() as conn:
                channel = conn.default_channel
                try:
                    declared = channel.queue_declare(self.settings.celery_queue, passive=True)
                except conn.connection_errors:
                    raise
                except Exception:  # the broker says the queue does not exist (yet): none queued
                    return 0
                return int(declared.message_count)
        except Exception as exc:  # kombu/amqp/redis connection errors
            raise BrokerUnavailable(_broker_name(self.settings), _detail(exc)) from exc

    def _start_worker(self, settings: Settings) -> subprocess.Popen[bytes]:
        assert self.processes is not None
        env = {
            **os.environ,
            "CRAWLQ_BROKER_URL": settings.broker_url or "",
            "CRAWLQ_FRONTIER": settings.frontier or "",
            "CRAWLQ_CELERY_QUEUE": settings.celery_queue,
        }
        # The job keeps no store password, and code and local paths are never taken from
        # it: the worker gets this command's own values.
        if has_password(settings.store) or "store" in settings.explicit:
            env["CRAWLQ_STORE"] = settings.store
        if settings.spider is not None and "spider" in settings.explicit:
            env["CRAWLQ_SPIDER"] = settings.spider
        if settings.trust_job_code:
            env["CRAWLQ_TRUST_JOB_CODE"] = "1"
        if settings.metrics_port is not None:  # the worker does the work: it serves metrics
            env["CRAWLQ_METRICS_PORT"] = str(settings.metrics_port)
            env["CRAWLQ_METRICS_HOST"] = settings.metrics_host
        cmd = [
            sys.executable, "-m", "celery", "-A", "crawlq.celery", "worker",
            "--concurrency", str(self.processes), "--loglevel", self.loglevel,
            "-Q", settings.celery_queue, "--without-gossip", "--without-mingle",
            "--without-heartbeat",
        ]  # fmt: skip
        # a session of its own: only this process signals it (a terminal's Ctrl-C reaches the
        # whole foreground group), and it can be killed with its pool processes
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True)

    async def _stop_worker(self) -> None:
        """Stop the local worker: warm, cold after `STOP_GRACE_S`, killed `KILL_AFTER_S` later.

        Waits without blocking the event loop, so a second Ctrl-C (`stop` with ``force``) is
        handled meanwhile.
        """
        worker = self._worker
        if worker is None:
            return
        if self._stopping_since is None:
            self._stopping_since = time.monotonic()
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)  # warm: takes no new task
        cold_at = self._stopping_since + STOP_GRACE_S
        kill_at = cold_at + KILL_AFTER_S
        while worker.poll() is None:
            now = time.monotonic()
            if now >= kill_at:
                logger.warning("the local celery worker did not stop: killing it")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.pid, signal.SIGKILL)
                break
            if now >= cold_at and not self._cold:
                self._cold = True
                logger.info("cancelling the local celery worker's running tasks (requeued)")
                worker.send_signal(signal.SIGQUIT)
            await asyncio.sleep(0.05)
        await asyncio.to_thread(worker.wait)
        self._worker = None


class _NoWorkerWatch:
    """Says once, after `NO_WORKER_WARN_S`, that no Celery worker takes the job's tasks.

    Without it, ``crawl --engine celery`` with no worker consuming its queue (none started,
    or one listening to another queue or broker) would wait silently forever. Once workers
    show up, it says so too.
    """

    def __init__(self, started_s: float) -> None:
        self.started_s = started_s
        self.settled: int | None = None
        self.warned = False

    async def look(self, crawl: CeleryCrawl, state: CeleryState, counts: Counts) -> None:
        """Check, at most every poll; logs a warning (or, after one, the recovery) once."""
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
        if await state.live_workers(crawl.settings.worker_stale_s) > 0:
            return
        waiting = crawl._queued()
        if waiting == 0:
            return
        s = crawl.settings
        logger.warning(
            "no Celery worker has taken a task of job %s for %.0fs: %d tasks wait in queue %r "
            "on %s. Start workers: CRAWLQ_BROKER_URL=%s celery -A crawlq.celery worker -Q %s "
            "(or re-run this command with --processes P to start one here)",
            s.job,
            NO_WORKER_WARN_S,
            waiting,
            s.celery_queue,
            _broker_name(s),
            _broker_name(s),
            s.celery_queue,
        )
        self.warned = True


def _stats(counts: Counts) -> FrontierStats:
    return FrontierStats(
        queued=max(0, counts.pending - counts.delayed),
        in_flight=0,
        delayed=counts.delayed,
        done=counts.done,
        dead=counts.dead,
        seen=counts.seen,
        over_budget=counts.over_budget,
    )


def _broker_name(settings: Settings) -> str:
    """The broker URL without its user and password."""
    url = settings.broker_url or "?"
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else url


def _detail(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def _check_broker(settings: Settings) -> None:
    """Connect to the broker once, so a wrong URL or login fails before anything is seeded.

    Raises:
        BrokerUnavailable: The broker cannot be reached or refused the login.
    """
    app = make_app(settings)
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=5)
    except Exception as exc:  # kombu OperationalError, amqp AccessRefused, OSError...
        raise BrokerUnavailable(_broker_name(settings), _detail(exc)) from exc
    finally:
        app.close()
