"""robots.txt shared by the workers of a job: the store contract and the claim-or-wait loop.

With a shared store (the job's frontier, see `crawlq.frontier.contract.Frontier`) robots.txt is
fetched once per origin per job, not once per worker: the record (status class, text, fetch
time and expiry, `crawlq.frontier.robots.RobotsRecord`) lives in the frontier, the first worker
that needs a missing or expired one claims the fetch (`RobotsStore.robots_claim`, which reads
and claims in one round trip) and stores the result, and the others wait for it and read it
(`load_shared`). Times are Unix ms from the caller's clock; waits are in seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from crawlq.clock import Clock
from crawlq.frontier.robots import RobotsRecord

__all__ = ["RobotsStore", "load_shared"]


class RobotsStore(Protocol):
    """Where the job's robots.txt records are shared: the frontier's three robots methods.

    `crawlq.frontier.contract.Frontier` documents them; every frontier backend is one.
    """

    async def robots_get(self, origin: str) -> RobotsRecord | None:
        """The stored record of ``origin`` (expired or not), or None."""
        ...

    async def robots_claim(
        self, origin: str, holder: str, ttl_s: float, *, force: bool = False
    ) -> tuple[RobotsRecord | None, bool]:
        """The stored record, and the claim on its fetch unless it is fresh."""
        ...

    async def robots_put(self, origin: str, record: RobotsRecord) -> None:
        """Store ``origin``'s record and end the claim on it."""
        ...


async def load_shared(
    shared: RobotsStore,
    origin: str,
    earlier: RobotsRecord | None,
    fetch: Callable[[RobotsRecord | None], Awaitable[RobotsRecord]],
    *,
    holder: str,
    claim_ttl_s: float,
    poll_s: float,
    clock: Clock,
) -> tuple[RobotsRecord, bool]:
    """Read the job's record; if missing or expired, fetch it or wait for whoever does.

    One round trip when the record is fresh or this worker gets the claim.

    Args:
        shared: The job's store.
        origin: ``scheme://host[:port]``.
        earlier: This process's last copy, if any (RFC 9309 §2.4: kept while unreachable).
        fetch: Fetches robots.txt given the last good copy, and returns the new record.
        holder: Id under which this worker claims the fetch.
        claim_ttl_s: Seconds a claim holds; a waiter gives up after 1.5 times this and gets
            an ``unreachable`` record.
        poll_s: Seconds between the first two reads while waiting; doubles up to 0.5 s.
        clock: Source of Unix ms.

    Returns:
        The record, and whether this call fetched it.
    """
    waited_s = 0.0
    pause_s = poll_s
    while True:
        record, claimed = await shared.robots_claim(origin, holder, claim_ttl_s)
        if record is not None and record.status != "unreachable":
            earlier = record  # §2.4: the last good copy, kept while unreachable
        if claimed:
            fresh = await fetch(earlier)
            await shared.robots_put(origin, fresh)
            return fresh, True
        now = clock.wall_ms()
        if record is not None and record.fresh_at(now):
            return record, False
        if waited_s >= 1.5 * claim_ttl_s:
            detail = f"another worker's fetch of robots.txt took over {waited_s:.0f} s"
            return RobotsRecord("unreachable", now, now, detail=detail), False
        await asyncio.sleep(pause_s)  # another worker is fetching it
        waited_s += pause_s
        pause_s = min(2 * pause_s, 0.5)
