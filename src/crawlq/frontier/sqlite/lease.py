"""Leasing: the wait loop, choosing ready hosts, promoting due retries and reaping expired leases.

A lease step (one transaction) first frees the host slots of ``fetched`` leases, moves due
retries and expired leases back to the queue, then takes up to ``n`` requests among the hosts
whose next-allowed time has come and whose in-flight count is under their concurrency
(`crawlq.frontier.sqlite.tables.HOST_CONCURRENCY`): highest priority first, then push order.
Each host taken moves its next-allowed time by its delay in the same step. With nothing
ready, the step says when something will be (`LeaseMixin._next_wake_ms`) and `lease` waits
(`crawlq.frontier.lease_wait`) for that time or for a wake-up from a push or settle.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
from collections import Counter
from collections.abc import Sequence

from crawlq.frontier.lease_wait import check_lease_args, lease_with_wait
from crawlq.frontier.sqlite.core import FrontierFile, logger
from crawlq.frontier.sqlite.tables import (
    DELAYED,
    FETCHED,
    HOST_CONCURRENCY,
    HOST_DELAY,
    LEASED,
    QUEUED,
)
from crawlq.request import CrawlRequest, Lease

__all__ = ["LeaseMixin"]

_MAX_READY_HOSTS = 512  # hosts considered per lease call, oldest window first


class LeaseMixin(FrontierFile):
    """`lease` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def lease(
        self,
        n: int,
        worker_id: str,
        visibility_timeout_s: float,
        wait_s: float = 0.0,
        *,
        until_drained: bool = False,
        fetched: Sequence[Lease] = (),
    ) -> list[Lease]:
        """See `crawlq.frontier.base.Frontier.lease`."""
        vt_ms = check_lease_args(n, visibility_timeout_s)
        wakeup = self._wakeup
        if wakeup is None:
            wakeup = self._wakeup = asyncio.Event()

        async def try_lease(done: Sequence[Lease]) -> tuple[list[Lease], int | None]:
            wakeup.clear()  # before the try: a push during it wakes the sleep that follows
            return await self._run(self._lease_sync, n, worker_id, vt_ms, done)

        async def sleep(timeout_s: float, pending: bool) -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), timeout_s)

        return await lease_with_wait(
            try_lease,
            sleep,
            self.clock,
            wait_s=wait_s,
            until_drained=until_drained,
            fetched=fetched,
        )

    def _lease_sync(
        self, n: int, worker_id: str, vt_ms: int, fetched: Sequence[Lease]
    ) -> tuple[list[Lease], int | None]:
        now = self.clock.wall_ms()
        default_delay_ms = round(self.politeness.default.delay_s * 1000)
        default_conc = self.politeness.default.concurrency

        def step(conn: sqlite3.Connection) -> tuple[list[Lease], int | None]:
            if fetched:
                self._free_slots(conn, fetched)
            self._promote_and_reap(conn, now)
            hosts = conn.execute(
                f"SELECT host, inflight, {HOST_DELAY}, {HOST_CONCURRENCY}, flags "
                "FROM frontier_hosts WHERE queued > 0 AND next_at_ms <= ? "
                f"AND inflight < {HOST_CONCURRENCY} ORDER BY next_at_ms LIMIT ?",
                (default_delay_ms, default_conc, now, default_conc, _MAX_READY_HOSTS),
            ).fetchall()
            candidates: list[tuple[int, int, bytes, str, str, int]] = []
            delays: dict[str, int] = {}
            down: set[str] = set()
            for host, inflight, delay_ms, conc, flags in hosts:
                take = min(n, conc - inflight if delay_ms == 0 else 1)
                delays[host] = delay_ms
                if flags == "d":
                    down.add(host)
                for fp, priority, seq, request, attempt in conn.execute(
                    "SELECT fp, priority, seq, request, attempt FROM frontier_requests "
                    f"WHERE state={QUEUED} AND host=? ORDER BY priority DESC, seq LIMIT ?",
                    (host, take),
                ):
                    candidates.append((-priority, seq, fp, host, request, attempt))
            if not candidates:
                return [], self._next_wake_ms(conn, default_conc)
            candidates.sort()
            deadline = now + vt_ms
            leases: list[Lease] = []
            per_host: Counter[str] = Counter()
            updates: list[tuple[str, str, int, bytes]] = []
            for _, _, fp, host, request, attempt in candidates[:n]:
                lease_id = secrets.token_hex(8)
                updates.append((lease_id, worker_id, deadline, fp))
                per_host[host] += 1
                leases.append(
                    Lease(
                        lease_id=lease_id,
                        request=CrawlRequest.from_json(request),
                        attempt=attempt + 1,
                        worker_id=worker_id,
                        deadline_ms=deadline,
                        host_down=host in down,
                    )
                )
            conn.executemany(
                f"UPDATE frontier_requests SET state={LEASED}, attempt=attempt+1, lease_id=?, "
                "worker_id=?, deadline_ms=? WHERE fp=?",
                updates,
            )
            for host, count in per_host.items():
                conn.execute(
                    "UPDATE frontier_hosts SET queued=queued-?, inflight=inflight+?, "
                    "next_at_ms=? WHERE host=?",
                    (count, count, now + delays[host], host),
                )
            return leases, None

        leases, wake = self._tx(step)
        self._counts[QUEUED] -= len(leases)
        self._counts[LEASED] += len(leases)
        return leases, wake

    def _promote_and_reap(self, conn: sqlite3.Connection, now: int) -> None:
        """Move due retries to the queue, and expired leases back to it (their workers died)."""
        due = Counter(
            host
            for (host,) in conn.execute(
                f"UPDATE frontier_requests SET state={QUEUED} WHERE state={DELAYED} "
                "AND ready_at_ms <= ? "
                "RETURNING host",
                (now,),
            )
        )
        expired: Counter[str] = Counter()
        slots: Counter[str] = Counter()  # expired leases that still held a host slot
        for state in (LEASED, FETCHED):
            # The state is written into the SQL, not bound: only then can SQLite use the
            # partial index on it (frontier_leased, frontier_fetched) instead of a table scan.
            for (host,) in conn.execute(
                f"UPDATE frontier_requests SET state={QUEUED}, lease_id=NULL, worker_id=NULL, "
                f"deadline_ms=NULL WHERE state={state} AND deadline_ms <= ? RETURNING host",
                (now,),
            ):
                expired[host] += 1
                if state == LEASED:
                    slots[host] += 1
        if not due and not expired:
            return
        if expired:
            logger.warning("%d leases expired and were requeued", expired.total())
        self._adjust_hosts(conn, due + expired, Counter({h: -c for h, c in slots.items()}))
        self._counts[DELAYED] -= due.total()
        self._counts[LEASED] -= expired.total()
        self._counts[QUEUED] += due.total() + expired.total()

    def _free_slots(self, conn: sqlite3.Connection, leases: Sequence[Lease]) -> None:
        """Give back the host slots of held leases whose requests are done (`lease(fetched=)`)."""
        held = self._held_states(conn, leases)
        freed = [fp for fp, (state, _) in held.items() if state == LEASED]
        if not freed:
            return
        conn.executemany(
            f"UPDATE frontier_requests SET state={FETCHED} WHERE fp=?", [(fp,) for fp in freed]
        )
        per_host = Counter(held[fp][1] for fp in freed)
        self._adjust_hosts(conn, Counter(), Counter({h: -c for h, c in per_host.items()}))

    def _next_wake_ms(self, conn: sqlite3.Connection, default_conc: int) -> int | None:
        (host_ms,) = conn.execute(
            "SELECT min(next_at_ms) FROM frontier_hosts "
            f"WHERE queued > 0 AND inflight < {HOST_CONCURRENCY}",
            (default_conc,),
        ).fetchone()
        (retry_ms,) = conn.execute(
            f"SELECT min(ready_at_ms) FROM frontier_requests WHERE state={DELAYED}"
        ).fetchone()
        expiries = [
            conn.execute(
                f"SELECT min(deadline_ms) FROM frontier_requests WHERE state={state}"
            ).fetchone()[0]
            for state in (LEASED, FETCHED)
        ]
        times = [t for t in (host_ms, retry_ms, *expiries) if t is not None]
        return min(times) if times else None
