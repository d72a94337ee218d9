"""The native engine's worker: one process, many asyncio tasks, leasing from a shared frontier.

The loop (docs/architecture.md): lease a batch → `process` each lease in its own task → buffer
the outcomes → flush them in batches (`crawlq.engine.flush.Flusher`: store write, then push
discovered links, then settle the leases). Settling only after the store write returned is
what makes a crash at any moment re-deliver a URL instead of losing it, and the store's upsert
by fingerprint makes the re-delivery harmless. This module holds the lease loop and the
settling of each lease (`Worker`); the leases a worker holds, with their heartbeat, are
`crawlq.engine.flush.HeldLeases`; what a run counts is `crawlq.engine.outcome.WorkerCounters`.

Frontier errors: a `FrontierUnavailable` (Redis restarting, a lost connection) is ridden out
with backoff, results kept. A Redis at its maxmemory refuses only the pushes of new links
(`crawlq.engine.outage.FullFrontier`: not followed, ``frontier_full``): the worker drains the
queue meanwhile. Any other `FrontierError` is permanent (a `FrontierFull` from a step that
must write, the job lost in a Redis restart without persistence: `JobGone`; a refused
login): the worker stops leasing, lets its running fetches finish, writes every result it
has to the store, and `run` raises the error. It does not settle or release its leases: they
expire and go back to the queue, so nothing is lost (and nothing is written into a job that
is not the one it joined).

A finished request gives its host's politeness slot back with the worker's next lease call
(`Frontier.lease`'s ``fetched``), not at the flush, so the host takes its next request while
the page waits to be written; the worker holds at most ``concurrency + flush_max_items``
leases, so a slow write stops new leases instead of piling up results in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

from crawlq.engine.deps import Deps
from crawlq.engine.flush import Flusher, HeldLeases, KnownFingerprints
from crawlq.engine.metrics import recorder
from crawlq.engine.outage import outage_logged, outage_wait_s
from crawlq.engine.outcome import Kind, Outcome, WorkerCounters, internal_error, stored_job
from crawlq.engine.step import process
from crawlq.errors import CrawlqError, FrontierError, FrontierUnavailable
from crawlq.frontier import Frontier
from crawlq.request import Lease
from crawlq.store import Store

__all__ = ["Worker"]

logger = logging.getLogger(__name__)


_T = TypeVar("_T")


class Worker:
    """Leases from ``frontier`` and runs `crawlq.engine.step.process` on each lease.

    Args:
        frontier: Where work comes from.
        store: Where results go.
        deps: Fetcher, spider, scope and settings for `process`.
        worker_id: Stable id for leases (default ``host:pid:random``).
        exit_when_done: Return from `run` when the whole frontier has nothing queued, delayed
            or in flight (``--burst``); otherwise keep waiting for new work.
        max_pages: Most pages to store in this run (None: no limit); the engines pass the
            ``max_pages`` setting minus the pages stored by earlier runs.
        flush_max_items: Outcomes buffered before a flush; with the concurrency, also the
            bound on leases held at once (fetching, or finished and waiting for their flush).
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
        max_pages: int | None = None,
        flush_max_items: int = 64,
        flush_interval_s: float = 0.05,
        lease_wait_s: float = 1.0,
    ) -> None:
        self.frontier = frontier
        self.store = store
        self.deps = deps
        self.settings = deps.settings
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.exit_when_done = exit_when_done
        self.max_pages = max_pages
        self.lease_wait_s = lease_wait_s
        self.counters = WorkerCounters()
        self.stopped_by: str | None = None
        """Why `run` returned: ``done``, ``max_pages`` or ``stopped``."""
        self._active: dict[asyncio.Task[None], Lease] = {}
        self._held = HeldLeases()
        self._known = KnownFingerprints()  # skips links the frontier has surely seen
        self._pages_started = 0
        self._stopping = False
        self._idle = asyncio.Event()  # set while the lease loop waits for work
        self._slot_freed = asyncio.Event()
        self._min_lease = max(1, min(self.settings.lease_batch, self.settings.concurrency) // 4)
        self._max_held = self.settings.concurrency + flush_max_items
        self._fatal: CrawlqError | None = None
        self._forced = False
        self.metrics = recorder()
        """This process's Prometheus worker metrics (`crawlq.engine.metrics`), or None when off."""
        self._flusher = Flusher(
            frontier,
            store,
            self._held,
            self._known,
            max_items=flush_max_items,
            interval_s=flush_interval_s,
            idle=self._idle,
            room=self._slot_freed,
            fail=self._fail,
            forced=lambda: self._forced,
            metrics=self.metrics,
            job=stored_job(self.settings),
        )

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
        self.counters = self._flusher.counters = WorkerCounters()
        round_trips_before = self.frontier.round_trips
        background = [
            asyncio.create_task(self._flusher.loop(), name="crawlq-flush"),
            asyncio.create_task(
                self._held.renew_loop(self.frontier, self.worker_id, self.settings, self._fail),
                name="crawlq-renew",
            ),
        ]
        try:
            await self._lease_loop()
            if self._active:
                await asyncio.wait(list(self._active))
        finally:
            # A flush in progress has taken its batch off the buffer: cancelling it would lose
            # the batch's acks and counts (its leases would be released and fetched again).
            async with self._flusher.lock:
                for task in background:
                    task.cancel()
                await asyncio.gather(*background, return_exceptions=True)
            if self._fatal is None:
                await self._flusher.flush()
            elif isinstance(self._fatal, FrontierError):
                await self._flusher.keep_results()
            if self._held and not isinstance(self._fatal, FrontierError):
                held = self._held.leases()
                released = await self._retrying("release", lambda: self.frontier.release(held))
                logger.info("released %d leases back to the queue", released)
                self._held.clear()
            self.counters.round_trips = self.frontier.round_trips - round_trips_before
        if self._fatal is not None:
            raise self._fatal

    async def _wait_for_room(self) -> None:
        self._slot_freed.clear()
        await self._slot_freed.wait()

    async def _lease_loop(self) -> None:  # noqa: C901  (lease, wait, back off, stop)
        failures = 0
        while not self._stopping:
            if self._flusher.store_down:  # keep the results we have; lease again once it is back
                await self._wait_for_room()
                continue
            if self.max_pages is not None and self._pages_started >= self.max_pages:
                if not self._active:
                    self.stopped_by = "max_pages"
                    return
                await self._wait_for_room()
                continue
            # Nothing in flight: writing the finished pages first costs no parallelism, and
            # the frontier then knows their links when it picks by priority.
            if (
                self._flusher.pending
                and not self._active
                and not await self._flusher.flush_or_stop()
            ):
                return
            room = self.settings.concurrency - len(self._active)
            # Backpressure: finished pages wait for their flush while holding their leases;
            # when a flush is slow (a checkpoint, a store outage) stop leasing at a bound
            # instead of piling up results (and the links in them) in memory.
            room = min(room, self._max_held - len(self._held))
            if self.max_pages is not None:
                room = min(room, self.max_pages - self._pages_started)
            if room <= 0 or (room < self._min_lease and len(self._active) > self._min_lease):
                # Lease in batches (one frontier round trip for several slots), as long as
                # enough fetches are running to keep the connection pool busy meanwhile.
                await self._wait_for_room()
                continue
            try:
                leases = await self._lease(min(room, self.settings.lease_batch))
                failures = 0
            except FrontierUnavailable as exc:
                failures += 1
                delay = outage_wait_s(failures)
                if outage_logged(failures):
                    logger.warning(
                        "frontier unavailable (%s); try %d, retrying in %.1fs", exc, failures, delay
                    )
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
                self._held.add(lease)
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
        fetched = self._held.take_fetched()
        try:
            leases = await self.frontier.lease(n, self.worker_id, vt, fetched=fetched)
        except BaseException:
            self._held.give_back_fetched(fetched)  # their slots are freed with the next call
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
        await self._flusher.flush()
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
        if outcome.kind in (Kind.RELEASE, Kind.RETRY) and not self._held.holds(lease):
            self._pages_started -= 1  # lost to another worker: its to settle
            self._held.settled(lease)
            return
        if outcome.kind is Kind.RELEASE:
            self._pages_started -= 1
            self._held.drop(lease)
            await self._retrying("release", lambda: self.frontier.release([lease]))
            return
        if outcome.kind is Kind.RETRY:
            self._pages_started -= 1
            self._held.drop(lease)
            delay_s, reason = outcome.retry_delay_s, outcome.reason
            await self._retrying("retry", lambda: self.frontier.retry(lease, delay_s, reason))
            self.counters.retries += 1
            if self.metrics is not None:
                self.metrics.retried(reason)
            return
        if outcome.kind is not Kind.PAGE:
            self._pages_started -= 1
        self._held.fetched(lease)  # its host slot is given back with our next lease call
        self._flusher.add(outcome)

    async def _push_released(self, outcome: Outcome) -> None:
        """Push the links of a RELEASE outcome (a robots.txt's sitemaps) before its release.

        Pushed now, not with a batch: the lease goes back to the queue instead of being
        stored and acked, and the robots.txt it loaded is not loaded again by this process.
        """
        links = self._known.unknown(outcome.links)
        if links:
            if await self._flusher.push(links) is None:  # Redis is full: not followed
                outcome.skipped[self._flusher.full.reason] += len(links)
            else:
                self._known.add_all(link.fingerprint for link in links)
        self.counters.links += len(outcome.links)
        self.counters.skipped.update(outcome.skipped)

    def _fail(self, exc: CrawlqError) -> None:
        """Record an error that retrying does not fix (the first one wins) and stop."""
        if self._fatal is None:
            logger.info("stopping: %s", exc)
            self._fatal = exc
        self.stop()

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
            self._held.drop(lease)
            with contextlib.suppress(CrawlqError):
                await self.frontier.release([lease])
            return None
        except Exception as exc:
            return internal_error(lease, exc)

    async def _retrying(self, what: str, op: Callable[[], Awaitable[_T]]) -> _T:
        """Run a frontier operation through an outage, keeping our results meanwhile."""
        return await self._flusher.retrying(what, op)
