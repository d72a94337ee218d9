"""The native engine: one process, many asyncio tasks, leasing from a shared frontier.

The loop (docs/architecture.md): lease a batch → `process` each lease in its own task → buffer
the outcomes → flush them in batches (store write, then push discovered links, then settle the
leases). Settling only after the store write returned is what makes a crash at any moment
re-deliver a URL instead of losing it, and the store's upsert by fingerprint makes the
re-delivery harmless.

Leases live on heartbeats (docs/architecture.md invariant 8): each lease is held for
``lease_hold_s`` (``heartbeat_s`` x ``stale_after_beats``, 15 s by default, or the visibility
timeout when that is shorter) and renewed with every heartbeat, every ``heartbeat_s`` (at most
a third of the hold), by a task of its own that runs while the downloads do. A live worker's
slow download is therefore never handed to another worker, and a killed worker's leases (and
the politeness slots they hold) go back to the queue within the hold, in the frontier's one
atomic step that requeues expired leases.

Frontier errors: a `FrontierUnavailable` (Redis restarting, a lost connection) is ridden out
with backoff, results kept. Any other `FrontierError` is permanent (Redis at its maxmemory:
`FrontierFull`; the job lost in a Redis restart without persistence: `JobGone`; a refused
login): the worker stops leasing, lets its running fetches finish, writes every result it
has to the store, and `run` raises the error. It does not settle or release its leases: they
expire and go back to the queue, so nothing is lost (and nothing is written into a job that
is not the one it joined).

A finished request gives its host's politeness slot back with the worker's next lease call
(`Frontier.lease`'s ``fetched``), not at the flush, so the host takes its next request while
the page waits to be written; the worker holds at most ``concurrency + flush_batch`` leases,
so a slow write stops new leases instead of piling up results in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from crawlq.engine.deps import Deps
from crawlq.engine.known import KnownFingerprints
from crawlq.engine.metrics import recorder
from crawlq.engine.outage import outage_wait_s
from crawlq.engine.outcome import Kind, Outcome, internal_error, result_batch
from crawlq.engine.step import process
from crawlq.errors import CrawlqError, FrontierError, FrontierUnavailable, StoreUnavailable
from crawlq.frontier import Frontier
from crawlq.records import spider_error_type
from crawlq.request import Lease
from crawlq.store import ResultBatch, Store

__all__ = ["Worker", "WorkerCounters"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


@dataclass(slots=True)
class WorkerCounters:
    """What one worker did in this run (totals across runs live in the store).

    Attributes:
        pages: Page records written.
        items: Items written.
        retries: Transient failures sent back for a retry.
        dead: URLs dead-lettered, by reason.
        filtered: URLs skipped after leasing (robots.txt), by reason.
        skipped: Discovered links not followed, by scope reason (per occurrence).
        spider_errors: Pages stored with a spider error, by kind (``KeyError`` …; see
            `crawlq.records.spider_error_type`).
        links: Discovered links pushed to the frontier (before dedup).
        round_trips: Requests to the frontier's backend (`Frontier.round_trips`) in this run.
        started_s: `time.monotonic` at the start of `Worker.run`.
    """

    pages: int = 0
    items: int = 0
    retries: int = 0
    dead: Counter[str] = field(default_factory=Counter)
    filtered: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    spider_errors: Counter[str] = field(default_factory=Counter)
    links: int = 0
    round_trips: int = 0
    started_s: float = field(default_factory=time.monotonic)


class Worker:
    """Leases from ``frontier`` and runs `crawlq.engine.step.process` on each lease.

    Args:
        frontier: Where work comes from.
        store: Where results go.
        deps: Fetcher, spider, scope and settings for `process`.
        worker_id: Stable id for leases (default ``host:pid:random``).
        exit_when_done: Return from `run` when the whole frontier has nothing queued, delayed
            or in flight (``--burst``); otherwise keep waiting for new work.
        page_budget: Most pages to store in this run (None: no limit); the CLI passes
            ``max_pages`` minus the pages stored by earlier runs.
        flush_batch: Outcomes buffered before a flush; with the concurrency, also the bound
            on leases held at once (fetching, or finished and waiting for their flush).
        flush_interval_s: Longest time, in seconds, an outcome waits for its flush while the
            worker is busy (an idle worker flushes at once).
        lease_wait_s: Seconds one blocking lease call waits for work before the loop checks
            whether to stop.
    """

    def __init__(
        self,
        frontier: Frontier,
        store: Store,
        deps: Deps,
        *,
        worker_id: str | None = None,
        exit_when_done: bool = True,
        page_budget: int | None = None,
        flush_batch: int = 64,
        flush_interval_s: float = 0.05,
        lease_wait_s: float = 1.0,
    ) -> None:
        self.frontier = frontier
        self.store = store
        self.deps = deps
        self.settings = deps.settings
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.exit_when_done = exit_when_done
        self.page_budget = page_budget
        self.flush_batch = flush_batch
        self.flush_interval_s = flush_interval_s
        self.lease_wait_s = lease_wait_s
        self.counters = WorkerCounters()
        self.stopped_by: str | None = None
        """Why `run` returned: ``done``, ``max_pages`` or ``stopped``."""
        self._active: dict[asyncio.Task[None], Lease] = {}
        self._held: dict[str, Lease] = {}
        self._fetched: list[Lease] = []  # held leases whose requests are done: slots to free
        self._lost: set[str] = set()  # ids of leases another worker took over (not settled)
        self._known = KnownFingerprints()  # skips links the frontier has surely seen
        self._pending: list[Outcome] = []
        self._pages_started = 0
        self._stopping = False
        self._idle = asyncio.Event()  # set while the lease loop waits for work
        self._slot_freed = asyncio.Event()
        self._results = asyncio.Event()
        self._flush_lock = asyncio.Lock()
        self._min_lease = max(1, min(self.settings.lease_batch, self.settings.concurrency) // 4)
        self._max_held = self.settings.concurrency + flush_batch
        self._fatal: CrawlqError | None = None
        self._forced = False
        self._store_down = False  # a store write is failing: lease nothing new meanwhile
        self.metrics = recorder()
        """This process's Prometheus worker metrics (`crawlq.engine.metrics`), or None when off."""

    # -- control --------------------------------------------------------------------------

    def stop(self, *, force: bool = False) -> None:
        """Stop leasing; safe to call from a signal handler.

        In-flight fetches finish; a page still parsing (or in its callback) a second later is
        abandoned and its lease released (`crawlq.engine.pagework.PageWork.hurry`); with
        ``force`` everything in flight is cancelled and its lease released back to the queue.
        """
        self._stopping = True
        self.deps.pages.hurry()
        self.stopped_by = self.stopped_by or "stopped"
        self._slot_freed.set()
        if force:
            self._forced = True
            for task in self._active:
                task.cancel()

    @property
    def in_flight(self) -> int:
        """Leases being processed now."""
        return len(self._active)

    # -- main loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """Work until the frontier is drained, the page budget is spent, or `stop` is called.

        "Drained" counts only with ``exit_when_done``. Always flushes what it finished before
        returning.

        Raises:
            FrontierError: The frontier failed in a way retrying does not fix (not a
                `FrontierUnavailable`); the results fetched so far are in the store, the
                leases left to expire.
            StoreError: The store refused results for a reason other than an outage (a
                schema too new, a dropped table); the unwritten results' leases are released.
        """
        self.counters = WorkerCounters()
        round_trips_before = self.frontier.round_trips
        background = [
            asyncio.create_task(self._flush_loop(), name="crawlq-flush"),
            asyncio.create_task(self._renew_loop(), name="crawlq-renew"),
        ]
        try:
            await self._lease_loop()
            if self._active:
                await asyncio.wait(list(self._active))
        finally:
            # A flush in progress has taken its batch off _pending: cancelling it would lose
            # the batch's acks and counts (its leases would be released and fetched again).
            async with self._flush_lock:
                for task in background:
                    task.cancel()
                await asyncio.gather(*background, return_exceptions=True)
            if self._fatal is None:
                await self._flush()
            elif isinstance(self._fatal, FrontierError):
                await self._keep_results()
            if self._held and not isinstance(self._fatal, FrontierError):
                held = list(self._held.values())
                released = await self._retrying("release", lambda: self.frontier.release(held))
                logger.info("released %d leases back to the queue", released)
                self._held.clear()
            self.counters.round_trips = self.frontier.round_trips - round_trips_before
        if self._fatal is not None:
            raise self._fatal

    async def _lease_loop(self) -> None:
        failures = 0
        while not self._stopping:
            if self._store_down:  # keep the results we have; lease again once it is back
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            if self.page_budget is not None and self._pages_started >= self.page_budget:
                if not self._active:
                    self.stopped_by = "max_pages"
                    return
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            # Nothing in flight: writing the finished pages first costs no parallelism, and
            # the frontier then knows their links when it picks by priority.
            if self._pending and not self._active and not await self._flush_or_stop():
                return
            room = self.settings.concurrency - len(self._active)
            # Backpressure: finished pages wait for their flush while holding their leases;
            # when a flush is slow (a checkpoint, a store outage) stop leasing at a bound
            # instead of piling up results (and the links in them) in memory.
            room = min(room, self._max_held - len(self._held))
            if self.page_budget is not None:
                room = min(room, self.page_budget - self._pages_started)
            if room <= 0 or (room < self._min_lease and len(self._active) > self._min_lease):
                # Lease in batches (one frontier round trip for several slots), as long as
                # enough fetches are running to keep the connection pool busy meanwhile.
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            try:
                leases = await self._lease(min(room, self.settings.lease_batch))
                failures = 0
            except FrontierUnavailable as exc:
                failures += 1
                delay = outage_wait_s(failures)
                logger.warning("frontier unavailable (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            except FrontierError as exc:
                self._fail(exc)
                return
            if not leases:
                if self.exit_when_done and await self._drained():
                    self.stopped_by = "done"
                    return
                continue
            self._known.add_all(lease.request.fingerprint for lease in leases)
            for lease in leases:
                self._held[lease.lease_id] = lease
                task = asyncio.create_task(self._run_one(lease))
                self._active[task] = lease
                self._pages_started += 1
            if self.metrics is not None:
                self.metrics.in_flight.set(len(self._active))

    async def _lease(self, n: int) -> list[Lease]:
        """Lease without waiting if work is ready; else wake the flusher and wait for work.

        Our own unsettled outcomes may be what holds the hosts' slots and the discovered
        links back, so a starving lease loop flushes at once instead of after the interval.
        """
        vt = self.settings.lease_hold_s
        fetched = [lease for lease in self._fetched if lease.lease_id in self._held]
        self._fetched = []
        try:
            leases = await self.frontier.lease(n, self.worker_id, vt, fetched=fetched)
        except BaseException:
            self._fetched[:0] = fetched  # their slots are freed with the next call instead
            raise
        if leases or (self.exit_when_done and not self._active and await self._drained()):
            return leases  # an empty list here means drained: the loop checks again and ends
        self._idle.set()
        # Our own fetches may not count as in flight in the frontier (their leases were lost
        # to another worker, which may have settled them): while any runs, wait for work as
        # an idle worker does instead of returning at once on a drained frontier, or this
        # loop would spin on the frontier until they end.
        until_drained = self.exit_when_done and not self._active
        try:
            return await self.frontier.lease(
                n, self.worker_id, vt, wait_s=self.lease_wait_s, until_drained=until_drained
            )
        finally:
            self._idle.clear()

    async def _drained(self) -> bool:
        if self._active:
            return False
        await self._flush()
        stats = await self._retrying("stats", self.frontier.stats)
        return stats.pending == 0 and not self._active

    # -- one lease ------------------------------------------------------------------------

    async def _run_one(self, lease: Lease) -> None:
        task = asyncio.current_task()
        try:
            await self._settle_one(lease)
        except FrontierError as exc:  # a permanent one: `_retrying` rides out the others
            self._fail(exc)
        finally:
            if task is not None:
                self._active.pop(task, None)
            if self.metrics is not None:
                self.metrics.in_flight.set(len(self._active))
            self._slot_freed.set()

    async def _settle_one(self, lease: Lease) -> None:
        outcome = await self._outcome(lease)
        if outcome is None:
            return
        if outcome.kind is Kind.RELEASE and outcome.links:
            await self._push_released(outcome)
        if outcome.kind in (Kind.RELEASE, Kind.RETRY) and not self._holds(lease):
            self._pages_started -= 1  # lost to another worker: its to settle
            self._lost.discard(lease.lease_id)
            return
        if outcome.kind is Kind.RELEASE:
            self._pages_started -= 1
            self._held.pop(lease.lease_id, None)
            await self._retrying("release", lambda: self.frontier.release([lease]))
            return
        if outcome.kind is Kind.RETRY:
            self._pages_started -= 1
            self._held.pop(lease.lease_id, None)
            delay_s, reason = outcome.retry_delay_s, outcome.reason
            await self._retrying("retry", lambda: self.frontier.retry(lease, delay_s, reason))
            self.counters.retries += 1
            if self.metrics is not None:
                self.metrics.retried(reason)
            return
        if outcome.kind is not Kind.PAGE:
            self._pages_started -= 1
        self._fetched.append(lease)  # its host slot is given back with our next lease call
        self._pending.append(outcome)
        self._results.set()

    async def _push_released(self, outcome: Outcome) -> None:
        """Push the links of a RELEASE outcome (a robots.txt's sitemaps) before its release.

        Pushed now, not with a batch: the lease goes back to the queue instead of being
        stored and acked, and the robots.txt it loaded is not loaded again by this process.
        """
        links = self._known.unknown(outcome.links)
        if links:
            await self._retrying("push", lambda: self.frontier.push(links))
            self._known.add_all(link.fingerprint for link in links)
        self.counters.links += len(outcome.links)
        self.counters.skipped.update(outcome.skipped)

    def _fail(self, exc: CrawlqError) -> None:
        """Record an error that retrying does not fix (the first one wins) and stop."""
        if self._fatal is None:
            logger.info("stopping: %s", exc)
            self._fatal = exc
        self.stop()

    async def _keep_results(self) -> None:
        """After a permanent frontier error: write the buffered results to the store only.

        Their leases are neither acked nor released (the frontier refuses writes, or is not
        the job any more): they expire, and the store's upsert absorbs a second fetch.
        """
        async with self._flush_lock:
            batch, self._pending = self._pending, []
            if not batch:
                return
            try:
                await self._write_store(result_batch(batch))
            except CrawlqError as exc:
                logger.error("cannot write %d results either: %s", len(batch), exc)
                return
            self._stored(batch)
            for o in batch:
                self._count(o)
            logger.info("wrote %d results to the store; their leases will expire", len(batch))

    async def _outcome(self, lease: Lease) -> Outcome | None:
        try:
            return await process(lease, self.deps)
        except asyncio.CancelledError:
            self._pages_started -= 1
            raise  # the lease stays held and is released at the end of run()
        except FrontierError as exc:
            self._pages_started -= 1
            if not isinstance(exc, FrontierUnavailable):  # the lease is left to expire
                self._fail(exc)
                return None
            logger.warning("frontier error while processing %s: %s", lease.request.url, exc)
            self._held.pop(lease.lease_id, None)
            with contextlib.suppress(CrawlqError):
                await self.frontier.release([lease])
            return None
        except Exception as exc:
            return internal_error(lease, exc)

    # -- writing results ------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await self._results.wait()
            if len(self._pending) < self.flush_batch and not self._idle.is_set():
                # Gather a batch, but flush at once when the lease loop starves: our unsettled
                # leases may be what keeps the hosts' slots (and the discovered links) back.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._idle.wait(), self.flush_interval_s)
            self._results.clear()
            if not await self._flush_or_stop():
                return

    async def _flush_or_stop(self) -> bool:
        """Flush; on an error that retrying does not fix, record it, stop, and return False."""
        try:
            await self._flush()
        except FrontierError as exc:  # a permanent one: the batch is in the store already
            self._fail(exc)
            return False
        except CrawlqError as exc:  # not an outage: retrying will not help
            logger.error("cannot write results, stopping: %s", exc)
            self._fail(exc)
            return False
        return True

    async def _flush(self) -> None:
        async with self._flush_lock:
            if not self._pending:
                return
            batch, self._pending = self._pending, []
            await self._write_store(result_batch(batch))
            self._stored(batch)
            links = self._known.unknown([link for o in batch for link in o.links])
            if links:
                await self._retrying("push", lambda: self.frontier.push(links))
                self._known.add_all(link.fingerprint for link in links)
            # A lease lost to another worker (see _renew_loop) is that worker's to settle.
            done = [o.lease for o in batch if o.kind is not Kind.DEAD and self._holds(o.lease)]
            await self._retrying("ack", lambda: self.frontier.ack(done))
            for o in batch:
                if o.kind is Kind.DEAD and self._holds(o.lease):
                    dead = functools.partial(self.frontier.dead, o.lease, o.reason)
                    await self._retrying("dead", dead)
                self._held.pop(o.lease.lease_id, None)
                self._lost.discard(o.lease.lease_id)
                self._count(o)
            self._slot_freed.set()  # room under the bound on held leases

    def _stored(self, batch: list[Outcome]) -> None:
        """Update the Prometheus metrics of a batch just written to the store.

        Counted here, before the batch's leases are settled, so that once the frontier has
        nothing pending the metrics of all workers add up to the store's totals.
        """
        if self.metrics is not None:
            for o in batch:
                self.metrics.settled(o)

    def _count(self, o: Outcome) -> None:
        c = self.counters
        c.links += len(o.links)
        c.skipped.update(o.skipped)
        if o.kind is Kind.PAGE:
            c.pages += 1
            c.items += len(o.items)
            kind = spider_error_type(o.page.error) if o.page is not None else None
            if kind is not None:
                c.spider_errors[kind] += 1
        elif o.kind is Kind.DEAD:
            c.dead[o.reason] += 1
        elif o.kind is Kind.FILTERED:
            c.filtered[o.reason] += 1

    async def _retrying(self, what: str, op: Callable[[], Awaitable[_T]]) -> _T:
        """Run a frontier operation until the frontier answers, keeping our results meanwhile.

        A frontier outage (Redis restarting) pauses the worker instead of failing it: the
        outcomes already computed stay buffered and are written when it is back.
        """
        failures = 0
        while True:
            try:
                result = await op()
            except FrontierUnavailable as exc:
                if self._forced:
                    raise  # a second Ctrl-C: stop waiting; unsettled leases expire normally
                failures += 1
                delay = outage_wait_s(failures)
                logger.warning(
                    "frontier unavailable during %s (%s); keeping results, retrying in %.1fs",
                    what,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            if failures:
                logger.warning("frontier reachable again after %d failed tries", failures)
            return result

    async def _write_store(self, batch: ResultBatch) -> None:
        failures = 0
        while True:
            try:
                await self.store.write(batch)
                if self._store_down:
                    logger.warning("store reachable again after %d failed writes", failures)
                    self._store_down = False
                    self._slot_freed.set()
                return
            except StoreUnavailable as exc:
                self._store_down = True
                failures += 1
                delay = outage_wait_s(failures)
                logger.warning(
                    "store write of %d records failed (%s); keeping them and leasing nothing new,"
                    " retrying in %.1fs",
                    len(batch),
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)

    async def _renew_loop(self) -> None:
        hold_s = self.settings.lease_hold_s
        interval = min(self.settings.heartbeat_s, hold_s / 3)
        while True:
            await asyncio.sleep(interval)
            held = list(self._held.values())  # renewing none still records the heartbeat
            try:
                renewed = await self.frontier.renew(held, hold_s, worker_id=self.worker_id)
            except FrontierUnavailable as exc:
                logger.warning("could not renew %d leases: %s", len(held), exc)
                continue
            except FrontierError as exc:  # the job is gone, Redis refuses: stop the worker
                self._fail(exc)
                return
            kept = {lease.lease_id for lease in renewed}
            for lease in held:
                if lease.lease_id not in kept and lease.lease_id in self._held:
                    # Another worker has it now: stop renewing, settling and releasing it (its
                    # fetch may still finish here; the store's upsert absorbs the repeat).
                    logger.warning("lost lease on %s (expired)", lease.request.url)
                    del self._held[lease.lease_id]
                    self._lost.add(lease.lease_id)

    def _holds(self, lease: Lease) -> bool:
        """Whether this worker still holds ``lease`` (it was not lost to another worker)."""
        return lease.lease_id not in self._lost
