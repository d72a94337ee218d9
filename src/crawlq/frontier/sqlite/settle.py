"""Settling leases: renew, ack, retry, dead and release, each only while the lease is held.

A settle step checks each lease against its row (same lease id, still leased), moves the held
ones to their new state in one transaction and gives back their host slots; an ack also
forgets its hosts' strikes. A lease that expired or was settled already counts for nothing.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence

from crawlq.frontier.sqlite.core import FrontierFile
from crawlq.frontier.sqlite.tables import DEAD, DELAYED, DONE, HELD, LEASED, QUEUED
from crawlq.request import Lease

__all__ = ["SettleMixin"]


class SettleMixin(FrontierFile):
    """`renew`, `ack`, `retry`, `dead` and `release` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def renew(
        self, leases: Sequence[Lease], visibility_timeout_s: float, worker_id: str | None = None
    ) -> list[Lease]:
        """See `crawlq.frontier.base.Frontier.renew` (one process owns the file: no heartbeat)."""
        if not leases:
            return []
        return await self._run(self._renew_sync, leases, round(visibility_timeout_s * 1000))

    def _renew_sync(self, leases: Sequence[Lease], vt_ms: int) -> list[Lease]:
        deadline = self.clock.wall_ms() + vt_ms

        def step(conn: sqlite3.Connection) -> list[Lease]:
            renewed = []
            for lease in leases:
                cur = conn.execute(
                    "UPDATE frontier_requests SET deadline_ms=? WHERE fp=? AND lease_id=? "
                    f"AND {HELD}",
                    (deadline, lease.request.fingerprint, lease.lease_id),
                )
                if cur.rowcount:
                    renewed.append(
                        Lease(
                            lease.lease_id, lease.request, lease.attempt, lease.worker_id, deadline
                        )
                    )
            return renewed

        return self._tx(step)

    async def ack(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.base.Frontier.ack`."""
        return await self._settle(leases, DONE, None, None)

    async def retry(self, lease: Lease, delay_s: float, reason: str) -> bool:
        """See `crawlq.frontier.base.Frontier.retry`."""
        if delay_s < 0:
            raise ValueError(f"delay_s must not be negative, got {delay_s}")
        due = self.clock.wall_ms() + round(delay_s * 1000)
        return await self._settle([lease], DELAYED, reason, due) == 1

    async def dead(self, lease: Lease, reason: str) -> bool:
        """See `crawlq.frontier.base.Frontier.dead`."""
        return await self._settle([lease], DEAD, reason, None) == 1

    async def release(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.base.Frontier.release`."""
        return await self._settle(leases, QUEUED, None, None)

    async def _settle(
        self, leases: Sequence[Lease], state: int, reason: str | None, due_ms: int | None
    ) -> int:
        if not leases:
            return 0
        count = await self._run(self._settle_sync, leases, state, reason, due_ms)
        if count:
            self._wake()
        return count

    def _settle_sync(
        self, leases: Sequence[Lease], state: int, reason: str | None, due_ms: int | None
    ) -> int:
        attempt_delta = -1 if state == QUEUED else 0
        dead_at = self.clock.wall_ms() if state == DEAD else None

        def step(conn: sqlite3.Connection) -> int:
            held = self._held_states(conn, leases)
            if not held:
                return 0
            conn.executemany(
                "UPDATE frontier_requests SET state=?, attempt=attempt+?, "
                "reason=coalesce(?, reason), ready_at_ms=coalesce(?, ready_at_ms), "
                "lease_id=NULL, worker_id=NULL, deadline_ms=NULL, dead_at_ms=? WHERE fp=?",
                [(state, attempt_delta, reason, due_ms, dead_at, fp) for fp in held],
            )
            settled = Counter(host for _, host in held.values())
            slots = Counter(host for was, host in held.values() if was == LEASED)
            queued = settled if state == QUEUED else Counter()
            self._adjust_hosts(conn, queued, Counter({h: -c for h, c in slots.items()}))
            if state == DONE:  # the hosts answered: forget their strikes, close breakers
                self._host_answered(conn, settled)
            return settled.total()

        count = self._tx(step)
        self._counts[LEASED] -= count
        self._counts[state] += count
        return count
