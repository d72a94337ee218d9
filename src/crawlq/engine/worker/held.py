"""The leases a native worker holds, and the heartbeat that keeps them (`HeldLeases`).

Leases live on heartbeats (docs/architecture.md invariant 8): each lease is held for
``lease_hold_s`` (``heartbeat_s`` x ``stale_after_beats``, 15 s by default, or the visibility
timeout when that is shorter) and renewed with every heartbeat, every ``heartbeat_s`` (at most
a third of the hold), by a task of its own that runs while the downloads do. A live worker's
slow download is therefore never handed to another worker, and a killed worker's leases (and
the politeness slots they hold) go back to the queue within the hold, in the frontier's one
atomic step that requeues expired leases.

A lease the frontier does not renew went to another worker: it is dropped and remembered as
lost, so this worker neither renews, settles nor releases it (its fetch may still finish
here; the store's upsert absorbs the repeat). A finished request's lease waits in
``fetched`` until the worker's next lease call gives its host's politeness slot back
(`Frontier.lease`'s ``fetched``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from crawlq.errors import CrawlqError, FrontierError, FrontierUnavailable
from crawlq.frontier import Frontier
from crawlq.request import Lease
from crawlq.settings import Settings

__all__ = ["HeldLeases"]

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
