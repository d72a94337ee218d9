"""The work queue in the SQLite file (`crawlq.frontier.queue.WorkQueue`): push, lease, settle.

Push: `SqliteWorkQueue.push` and ``offer`` insert each new fingerprint as a queued row and
count it on its host row (``queued``, and ``admitted`` for ``max_pages_per_host``), in one
transaction per call. Without `crawlq.frontier.queue.QueueBounds` rows are inserted host by
host with ``INSERT OR IGNORE``; with bounds, row by row (`crawlq.frontier.sqlite.bounded`), so
that a full queue can refuse (``offer``) or dead-letter the lowest-priority request as
``frontier_full``.

Lease: a lease step (one transaction) first frees the host slots of ``fetched`` leases, moves
due retries and expired leases back to the queue, then takes up to ``n`` requests among the
hosts whose next-allowed time has come and whose in-flight count is under their concurrency
(`crawlq.frontier.sqlite.schema.HOST_CONCURRENCY`): highest priority first, then push order.
Each host taken moves its next-allowed time by its delay in the same step. With nothing ready,
the step says when something will be (`SqliteWorkQueue._next_wake_ms`) and `lease` waits
(`crawlq.frontier.queue`) for that time or for a wake-up from a push or settle.

Settle: renew, ack, retry, dead and release check each lease against its row (same lease id,
still leased), move the held ones to their new state in one transaction and give back their
host slots; an ack also forgets its hosts' strikes. A lease that expired or was settled
already counts for nothing.

Counts per state are kept in memory by the owner (`crawlq.frontier.sqlite.file.FrontierFile`);
the busiest hosts and the hosts in backoff are read from the file (`SqliteWorkQueue.stats`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from crawlq.frontier.queue import (
    FrontierStats,
    HostBackoff,
    HostStats,
    Offer,
    backoff_state,
    check_lease_args,
    lease_with_wait,
)
from crawlq.frontier.sqlite.bounded import SEEN, BoundedPush
from crawlq.frontier.sqlite.file import logger
from crawlq.frontier.sqlite.schema import (
    DEAD,
    DELAYED,
    DONE,
    FETCHED,
    HELD,
    HOST_CONCURRENCY,
    HOST_DELAY,
    LEASED,
    QUEUED,
)
from crawlq.request import CrawlRequest, Lease

__all__ = ["SqliteWorkQueue"]

_INSERT_REQUEST = (
    "INSERT OR IGNORE INTO frontier_requests(fp, seq, host, priority, state, request) "
    f"VALUES (?, ?, ?, ?, {QUEUED}, ?)"
)
_MAX_READY_HOSTS = 512  # hosts considered per lease call, oldest window first


class SqliteWorkQueue(BoundedPush):
    """Push, lease, the settles and stats of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def push(self, requests: Sequence[CrawlRequest]) -> int:
        """See `crawlq.frontier.queue.WorkQueue.push`."""
        return (await self._offer(requests, producer=False)).queued

    async def offer(self, requests: Sequence[CrawlRequest]) -> Offer:
        """See `crawlq.frontier.queue.WorkQueue.offer`."""
        return await self._offer(requests, producer=True)

    async def _offer(self, requests: Sequence[CrawlRequest], *, producer: bool) -> Offer:
        if not requests:
            return Offer(0)
        if self.bounds.bounded:
            offer = await self._run(self._push_bounded_sync, requests, producer)
        else:
            offer = Offer(await self._run(self._push_sync, requests))
        if offer.queued:
            self._wake()
        return offer

    def _push_sync(self, requests: Sequence[CrawlRequest]) -> int:
        by_host: dict[str, list[tuple[bytes, int, str, int, str]]] = defaultdict(list)
        batch_seen: set[bytes] = set()
        for req in requests:
            if req.fingerprint in batch_seen:
                continue
            batch_seen.add(req.fingerprint)
            self._seq += 1
            by_host[req.host].append(
                (req.fingerprint, self._seq, req.host, req.priority, req.to_json())
            )

        budget = self.politeness.max_pages_per_host

        def step(conn: sqlite3.Connection) -> tuple[int, int]:
            total = over = 0
            for host, rows in by_host.items():
                before = conn.total_changes
                if budget is None:
                    conn.executemany(_INSERT_REQUEST, rows)
                else:
                    over += self._insert_within(conn, host, rows, budget)
                added = conn.total_changes - before
                if added:
                    self._count_admitted(conn, host, added, added)
                    total += added
            self._count_over_budget(conn, over)
            return total, over

        total, over = self._tx(step)
        self._counts[QUEUED] += total
        self._over_budget += over
        return total

    @staticmethod
    def _insert_within(
        conn: sqlite3.Connection,
        host: str,
        rows: list[tuple[bytes, int, str, int, str]],
        budget: int,
    ) -> int:
        """Insert the new ``rows`` of ``host`` while it has room in its budget.

        Returns:
            How many new ones were left out (their fingerprints stay unseen: found again, they
            are counted again).
        """
        got = conn.execute("SELECT admitted FROM frontier_hosts WHERE host=?", (host,)).fetchone()
        room = budget - (got[0] if got else 0)
        over = 0
        for row in rows:
            if room > 0:
                room -= conn.execute(_INSERT_REQUEST, row).rowcount
            elif conn.execute(SEEN, row[:1]).fetchone() is None:
                over += 1
        return over

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
        """See `crawlq.frontier.queue.WorkQueue.lease`."""
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

    async def renew(
        self, leases: Sequence[Lease], visibility_timeout_s: float, worker_id: str | None = None
    ) -> list[Lease]:
        """See `crawlq.frontier.queue.WorkQueue.renew` (one owner process: no heartbeat)."""
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
        """See `crawlq.frontier.queue.WorkQueue.ack`."""
        return await self._settle(leases, DONE, None, None)

    async def retry(self, lease: Lease, delay_s: float, reason: str) -> bool:
        """See `crawlq.frontier.queue.WorkQueue.retry`."""
        if delay_s < 0:
            raise ValueError(f"delay_s must not be negative, got {delay_s}")
        due = self.clock.wall_ms() + round(delay_s * 1000)
        return await self._settle([lease], DELAYED, reason, due) == 1

    async def dead(self, lease: Lease, reason: str) -> bool:
        """See `crawlq.frontier.queue.WorkQueue.dead`."""
        return await self._settle([lease], DEAD, reason, None) == 1

    async def release(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.queue.WorkQueue.release`."""
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

    async def stats(self) -> FrontierStats:
        """See `crawlq.frontier.queue.WorkQueue.stats`."""

        def read() -> tuple[list[Any], list[Any]]:
            db = self._db()
            hosts = db.execute(
                "SELECT host, queued, inflight, next_at_ms FROM frontier_hosts "
                "WHERE queued > 0 OR inflight > 0 ORDER BY queued DESC, inflight DESC LIMIT 20"
            ).fetchall()
            backoff = db.execute(
                "SELECT host, pushbacks, failures, flags, next_at_ms FROM frontier_hosts "
                "WHERE pushbacks > 0 OR failures > 0 OR flags != '' "
                "ORDER BY next_at_ms DESC LIMIT 20"
            ).fetchall()
            return hosts, backoff

        rows, troubled = await self._run(read)
        c = self._counts
        return FrontierStats(
            queued=c[QUEUED],
            in_flight=c[LEASED],
            delayed=c[DELAYED],
            done=c[DONE],
            dead=c[DEAD],
            seen=c.total(),
            over_budget=self._over_budget,
            hosts=tuple(HostStats(*row) for row in rows),
            backoff=tuple(
                HostBackoff(host, pushbacks, failures, backoff_state(flags), next_at)
                for host, pushbacks, failures, flags, next_at in troubled
            ),
        )
