"""The native worker's leases from held to settled: the heartbeat, the batched writes.

A worker holds its leases in `HeldLeases` and writes its outcomes through `Flusher`: the
store, then links, then the settle.

Outcomes are buffered and flushed in batches of at most ``flush_max_items``, or after
``flush_interval_s`` while the worker is busy (at once when its lease loop starves: our own
unsettled leases may be what keeps the hosts' slots, and the discovered links, back). A flush
writes the store first, then pushes the new links, then acks, dead-letters or settles each
lease: settling only after the store write returned is what makes a crash at any moment
re-deliver a URL instead of losing it.

A Redis at its ``maxmemory`` refuses only the push of the new links: the batch is stored
and settled all the same, and its links are not followed (``frontier_full``, counted on
their pages' outcomes like a scope reason; `crawlq.engine.outage.FullFrontier`).

A store outage (`StoreUnavailable`) keeps the batch and retries the write with backoff while
the worker leases nothing new (``store_down``); a frontier outage is ridden out by
`crawlq.engine.outage.call_through_outage`. Any other error is the worker's to stop on.

Links are pushed past the worker's bounded memory of fingerprints the frontier has already
seen (`KnownFingerprints`). The frontier's seen set is the authority on dedup, and it only
grows: once a fingerprint has been pushed (or leased), every later push of it is a no-op. A
worker that remembers the fingerprints it pushed and leased recently can drop those links
before the push call, which saves the frontier a lookup per link (navigation links repeat on
every page). Forgetting is always safe: a forgotten fingerprint is simply pushed again and
deduplicated by the frontier.

Leases live on heartbeats (`HeldLeases`) (docs/architecture.md invariant 8): each lease is held for
``lease_hold_s`` (``heartbeat_s`` x ``stale_after_beats``, 15 s by default, or the visibility
timeout when that is shorter) and renewed with every heartbeat, every ``heartbeat_s`` (at most
a third of the hold), by a task of its own that runs while the downloads do. A live worker's
slow download is therefore never handed to another worker, and a killed worker's leases (and
the politeness slots they hold) go back to the queue within the hold, in the frontier's one
atomic step that requeues expired leases. A lease the frontier does not renew went to another
worker: it is dropped and remembered as lost, so this worker neither renews, settles nor
releases it (its fetch may still finish here; the store's upsert absorbs the repeat). A
finished request's lease waits in ``fetched`` until the worker's next lease call gives its
host's politeness slot back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import TypeVar

from crawlq.engine.metrics import WorkerMetrics
from crawlq.engine.outage import (
    FullFrontier,
    call_through_outage,
    outage_logged,
    outage_wait_s,
)
from crawlq.engine.outcome import Kind, Outcome, WorkerCounters, result_batch
from crawlq.errors import (
    CrawlqError,
    FrontierError,
    FrontierFull,
    FrontierUnavailable,
    StoreUnavailable,
)
from crawlq.frontier import Frontier
from crawlq.request import CrawlRequest, Lease
from crawlq.settings import Settings
from crawlq.store import ResultBatch, Store

__all__ = ["Flusher", "HeldLeases", "KnownFingerprints"]

logger = logging.getLogger(__name__)


class HeldLeases:
    """The leases one worker holds, by lease id, and the ids of those lost to another worker."""

    def __init__(self) -> None:
        self._held: dict[str, Lease] = {}
        self._lost: set[str] = set()  # ids of leases another worker took over (not settled)
        self._fetched: list[Lease] = []  # held leases whose requests are done: slots to free

    def __len__(self) -> int:
        return len(self._held)

    def add(self, lease: Lease) -> None:
        """Hold a lease just leased."""
        self._held[lease.lease_id] = lease

    def leases(self) -> list[Lease]:
        """The leases held now."""
        return list(self._held.values())

    def drop(self, lease: Lease) -> None:
        """Stop holding ``lease`` (released, retried or settled)."""
        self._held.pop(lease.lease_id, None)

    def settled(self, lease: Lease) -> None:
        """Forget ``lease`` entirely: settled by this worker, or by the one that took it."""
        self._held.pop(lease.lease_id, None)
        self._lost.discard(lease.lease_id)

    def clear(self) -> None:
        """Forget every held lease (released at the end of a run)."""
        self._held.clear()

    def holds(self, lease: Lease) -> bool:
        """Whether this worker still holds ``lease`` (it was not lost to another worker)."""
        return lease.lease_id not in self._lost

    def fetched(self, lease: Lease) -> None:
        """Note that ``lease``'s request is done: its host slot goes back with the next lease."""
        self._fetched.append(lease)

    def take_fetched(self) -> list[Lease]:
        """The done leases still held, whose slots the next lease call gives back."""
        fetched = [lease for lease in self._fetched if lease.lease_id in self._held]
        self._fetched = []
        return fetched

    def give_back_fetched(self, fetched: list[Lease]) -> None:
        """Keep ``fetched`` for the next lease call (this one failed)."""
        self._fetched[:0] = fetched

    async def renew_loop(
        self,
        frontier: Frontier,
        worker_id: str,
        settings: Settings,
        fail: Callable[[CrawlqError], None],
    ) -> None:
        """Renew every held lease each heartbeat until cancelled (module docstring).

        The first heartbeat is at once (the worker starts leasing beside it), so that
        ``crawlq status`` counts a worker as live from its start, not one heartbeat later.

        Args:
            frontier: Where the leases live.
            worker_id: The worker's id (renewing none still records its heartbeat).
            settings: ``lease_hold_s`` and ``heartbeat_s``.
            fail: Called with an error that retrying does not fix (the job is gone, Redis
                refuses); the loop then ends.
        """
        hold_s = settings.lease_hold_s
        interval = min(settings.heartbeat_s, hold_s / 3)
        this = asyncio.current_task()
        while await self._beat(frontier, worker_id, hold_s, fail):
            if this is not None and this.cancelling():
                # The worker stopped during this beat and the Redis client below swallowed
                # the cancellation: end here, or the worker would wait for this loop forever.
                raise asyncio.CancelledError
            await asyncio.sleep(interval)

    async def _beat(
        self,
        frontier: Frontier,
        worker_id: str,
        hold_s: float,
        fail: Callable[[CrawlqError], None],
    ) -> bool:
        """One heartbeat: renew the held leases; False when the loop must end (`renew_loop`)."""
        held = self.leases()  # renewing none still records the heartbeat
        try:
            renewed = await frontier.renew(held, hold_s, worker_id=worker_id)
        except FrontierUnavailable as exc:
            logger.warning("could not renew %d leases: %s", len(held), exc)
            return True
        except FrontierError as exc:  # the job is gone, Redis refuses: stop the worker
            fail(exc)
            return False
        kept = {lease.lease_id for lease in renewed}
        for lease in held:
            if lease.lease_id not in kept and lease.lease_id in self._held:
                # Another worker has it now: stop renewing, settling and releasing it (its
                # fetch may still finish here; the store's upsert absorbs the repeat).
                logger.warning("lost lease on %s (expired)", lease.request.url)
                del self._held[lease.lease_id]
                self._lost.add(lease.lease_id)
        return True


_T = TypeVar("_T")


class Flusher:
    """Buffers one worker's outcomes and writes them in batches (module docstring).

    Args:
        frontier: Where links are pushed and leases settled.
        store: Where results are written.
        held: The worker's held leases (a lost one is not settled here).
        known: Fingerprints the frontier has surely seen (links not pushed again).
        max_items: Outcomes buffered before a flush (``flush_max_items``).
        interval_s: Longest wait, in seconds, of an outcome for its flush while busy.
        idle: Set while the worker's lease loop waits for work.
        room: Set when leases are freed or the store is back (wakes the lease loop).
        fail: Records an error that retrying does not fix, and stops the worker.
        forced: True once a forced stop gives up waiting for the frontier.
        metrics: The worker's Prometheus metrics, or None.
        job: The job the results count for in the store (`crawlq.engine.outcome.stored_job`).
    """

    def __init__(
        self,
        frontier: Frontier,
        store: Store,
        held: HeldLeases,
        known: KnownFingerprints,
        *,
        max_items: int,
        interval_s: float,
        idle: asyncio.Event,
        room: asyncio.Event,
        fail: Callable[[CrawlqError], None],
        forced: Callable[[], bool],
        metrics: WorkerMetrics | None,
        job: str | None,
    ) -> None:
        self.job = job
        self.frontier = frontier
        self.store = store
        self.held = held
        self.known = known
        self.max_items = max_items
        self.interval_s = interval_s
        self.idle = idle
        self.room = room
        self.fail = fail
        self.forced = forced
        self.metrics = metrics
        self.counters = WorkerCounters()
        """The run's counters (the worker sets its own at the start of a run)."""
        self.full = FullFrontier()
        """Pushes refused by a Redis at its ``maxmemory`` (counted, logged once a minute)."""
        self.pending: list[Outcome] = []
        self.lock = asyncio.Lock()
        self.store_down = False
        """A store write is failing: the worker leases nothing new meanwhile."""
        self._results = asyncio.Event()

    def add(self, outcome: Outcome) -> None:
        """Buffer an outcome for the next flush."""
        self.pending.append(outcome)
        self._results.set()

    async def retrying(self, what: str, op: Callable[[], Awaitable[_T]]) -> _T:
        """Run a frontier operation; through an outage if it fails (`call_through_outage`)."""
        try:
            return await op()
        except FrontierUnavailable as exc:
            failed = exc
        return await call_through_outage(what, op, forced=self.forced, failed=failed)

    async def push(self, links: list[CrawlRequest]) -> int | None:
        """Push discovered links through an outage; a full Redis is `FullFrontier`'s to note.

        Returns:
            How many were new, or None when Redis is at its ``maxmemory`` and refused them
            (the caller counts them ``frontier_full``).
        """
        try:
            queued = await self.retrying("push", lambda: self.frontier.push(links))
        except FrontierFull as exc:
            self.full.refused_links(len(links), exc)
            return None
        if self.full.full:
            self.full.room_again()
        return queued

    async def loop(self) -> None:
        """Flush as outcomes come, until cancelled or an error stops the worker."""
        while True:
            await self._results.wait()
            if len(self.pending) < self.max_items and not self.idle.is_set():
                # Gather a batch, but flush at once when the lease loop starves: our unsettled
                # leases may be what keeps the hosts' slots (and the discovered links) back.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.idle.wait(), self.interval_s)
            self._results.clear()
            if not await self.flush_or_stop():
                return

    async def flush_or_stop(self) -> bool:
        """Flush; on an error that retrying does not fix, record it, stop, and return False."""
        try:
            await self.flush()
        except FrontierError as exc:  # a permanent one: the batch is in the store already
            self.fail(exc)
            return False
        except CrawlqError as exc:  # not an outage: retrying will not help
            logger.error("cannot write results, stopping: %s", exc)
            self.fail(exc)
            return False
        return True

    async def flush(self) -> None:
        """Write the buffered outcomes: store, links, then settle each lease."""
        async with self.lock:
            if not self.pending:
                return
            batch, self.pending = self.pending, []
            await self._write_store(result_batch(batch, job=self.job))
            links = self.known.unknown([link for o in batch for link in o.links])
            revisits = {r.fingerprint for o in batch if (r := o.revisit()) is not None}
            refused: set[bytes] = set()  # what a Redis at its maxmemory refused to queue
            queued = await self._push_revisits(
                [x for x in links if x.fingerprint in revisits], refused
            )
            links = [x for x in links if x.fingerprint not in revisits]
            if links:
                if await self.push(links) is None:
                    refused.update(link.fingerprint for link in links)
                else:
                    self.known.add_all(link.fingerprint for link in links)
            if refused:  # not followed: counted on the outcomes that found them
                for o in batch:
                    n = sum(link.fingerprint in refused for link in o.links)
                    if n:
                        o.skipped[FullFrontier.reason] += n
            self._stored(batch, queued)
            # A lease lost to another worker (see HeldLeases) is that worker's to settle.
            held = self.held
            done = [o.lease for o in batch if o.kind is not Kind.DEAD and held.holds(o.lease)]
            await self.retrying("ack", lambda: self.frontier.ack(done))
            for o in batch:
                if o.kind is Kind.DEAD and held.holds(o.lease):
                    dead = functools.partial(self.frontier.dead, o.lease, o.reason)
                    await self.retrying("dead", dead)
                held.settled(o.lease)
                self.counters.count(o, hop=o.is_hop(queued))
            self.room.set()  # room under the bound on held leases

    async def keep_results(self) -> None:
        """After a permanent frontier error: write the buffered results to the store only.

        Their leases are neither acked nor released (the frontier refuses writes, or is not
        the job any more): they expire, and the store's upsert absorbs a second fetch.
        """
        async with self.lock:
            batch, self.pending = self.pending, []
            if not batch:
                return
            try:
                await self._write_store(result_batch(batch, job=self.job))
            except CrawlqError as exc:
                logger.error("cannot write %d results either: %s", len(batch), exc)
                return
            self._stored(batch)
            for o in batch:
                self.counters.count(o)
            logger.info("wrote %d results to the store; their leases will expire", len(batch))

    async def _push_revisits(self, revisits: list[CrawlRequest], refused: set[bytes]) -> set[bytes]:
        """Push redirects' revisits (`Outcome.revisit`) one by one; return those queued.

        Whether a revisit was new decides how its redirect is counted (`_stored`); they are
        rare (a cookie wall, a redirect loop), so one push each costs little. A revisit that a
        Redis at its ``maxmemory`` refused goes into ``refused`` (the caller counts it on its
        outcome).
        """
        queued: set[bytes] = set()
        for link in revisits:
            new = await self.push([link])
            if new is None:
                refused.add(link.fingerprint)
                continue
            if new:
                queued.add(link.fingerprint)
            self.known.add_all([link.fingerprint])
        return queued

    def _stored(self, batch: list[Outcome], revisits: Collection[bytes] = ()) -> None:
        """Update the Prometheus metrics of a batch just written to the store.

        Counted here, after its links were pushed (a redirect whose revisit is in
        ``revisits``, the fingerprints queued, is a hop: `Outcome.revisit`) and before the
        batch's leases are settled, so that once the frontier has nothing pending the metrics
        of all workers add up to the store's totals.
        """
        if self.metrics is not None:
            for o in batch:
                self.metrics.settled(o, revisited=o.is_hop(revisits))

    async def _write_store(self, batch: ResultBatch) -> None:
        failures = 0
        while True:
            try:
                await self.store.write(batch)
                if self.store_down:
                    logger.warning("store reachable again after %d failed writes", failures)
                    self.store_down = False
                    self.room.set()
                return
            except StoreUnavailable as exc:
                self.store_down = True
                failures += 1
                delay = outage_wait_s(failures)
                if outage_logged(failures):
                    logger.warning(
                        "store write of %d records failed (%s); keeping them and leasing nothing"
                        " new, try %d, retrying in %.1fs",
                        len(batch),
                        exc,
                        failures,
                        delay,
                    )
                await asyncio.sleep(delay)


class KnownFingerprints:
    """Two generations of fingerprint sets, holding up to 2x ``capacity`` of them (~13 MiB).

    When the young generation reaches ``capacity`` it becomes the old one and the previous
    old one is dropped, so memory stays bounded (about 100 bytes per entry) while recently
    seen fingerprints (the ones that repeat) stay known.

    The default holds the last 65,536-131,072 fingerprints, enough for the navigation links
    that repeat across the pages of a large crawl (bench/RESULTS.md has the measurements);
    the memory (~13 MiB) is reached once and stays flat.

    Args:
        capacity: Fingerprints per generation, at least 1.

    Raises:
        ValueError: ``capacity`` is less than 1.
    """

    def __init__(self, capacity: int = 65536) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._young: set[bytes] = set()
        self._old: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def __contains__(self, fingerprint: object) -> bool:
        return fingerprint in self._young or fingerprint in self._old

    def add_all(self, fingerprints: Iterable[bytes]) -> None:
        """Remember fingerprints the frontier has seen (pushed or leased)."""
        for fp in fingerprints:
            if fp not in self._young:
                self._young.add(fp)
                if len(self._young) >= self.capacity:
                    self._old, self._young = self._young, set()

    def unknown(self, requests: Sequence[CrawlRequest]) -> list[CrawlRequest]:
        """Return the requests whose fingerprint is not known, each fingerprint once.

        Args:
            requests: Discovered requests, in order.

        Returns:
            The first request of each fingerprint that is neither known nor repeated earlier
            in ``requests``, in their order.
        """
        young, old = self._young, self._old
        batch: set[bytes] = set()
        out: list[CrawlRequest] = []
        for req in requests:
            fp = req.fingerprint
            if fp in young or fp in old or fp in batch:
                continue
            batch.add(fp)
            out.append(req)
        return out
