"""Pushing requests: dedup by fingerprint, the host page budget and the queue bounds.

`PushMixin.push` and `PushMixin.offer` insert each new fingerprint as a queued row and count
it on its host row (``queued``, and ``admitted`` for ``max_pages_per_host``), in one
transaction per call. Without `crawlq.frontier.base.QueueBounds` rows are inserted host by
host with ``INSERT OR IGNORE``; with bounds, row by row, so that a full queue can refuse
(``offer``) or dead-letter the lowest-priority request as ``frontier_full``.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Sequence

from crawlq.frontier.base import FRONTIER_FULL, Offer
from crawlq.frontier.sqlite.core import FrontierFile, logger
from crawlq.frontier.sqlite.tables import DEAD, OVER_BUDGET, QUEUED
from crawlq.request import CrawlRequest

__all__ = ["PushMixin"]

_INSERT_REQUEST = (
    "INSERT OR IGNORE INTO frontier_requests(fp, seq, host, priority, state, request) "
    f"VALUES (?, ?, ?, ?, {QUEUED}, ?)"
)
_SEEN = "SELECT 1 FROM frontier_requests WHERE fp=?"


class PushMixin(FrontierFile):
    """`push` and `offer` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def push(self, requests: Sequence[CrawlRequest]) -> int:
        """See `crawlq.frontier.base.Frontier.push`."""
        return (await self._offer(requests, producer=False)).queued

    async def offer(self, requests: Sequence[CrawlRequest]) -> Offer:
        """See `crawlq.frontier.base.Frontier.offer`."""
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
                    override = self.politeness.configured(host)
                    delay_ms = None if override is None else round(override.delay_s * 1000)
                    conc = None if override is None else override.concurrency
                    conn.execute(
                        "INSERT INTO frontier_hosts(host, queued, admitted, delay_ms, "
                        "concurrency) VALUES (?, ?, ?, ?, ?) ON CONFLICT(host) DO UPDATE SET "
                        "queued=queued+excluded.queued, admitted=admitted+excluded.admitted, "
                        "delay_ms=coalesce(delay_ms, excluded.delay_ms), "
                        "concurrency=coalesce(concurrency, excluded.concurrency)",
                        (host, added, added, delay_ms, conc),
                    )
                    total += added
            if over:
                conn.execute(
                    "INSERT INTO frontier_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO "
                    "UPDATE SET value=CAST(value AS INTEGER) + CAST(excluded.value AS INTEGER)",
                    (OVER_BUDGET, str(over)),
                )
            return total, over

        total, over = self._tx(step)
        self._counts[QUEUED] += total
        self._over_budget += over
        return total

    def _push_bounded_sync(self, requests: Sequence[CrawlRequest], producer: bool) -> Offer:
        """`push`/`offer` under `bounds` (`crawlq.frontier.base.QueueBounds`), row by row.

        The page budget (``max_pages_per_host``) is checked first, as in `_push_sync`.
        """
        b = self.bounds
        drop = b.when_full == "drop-lowest"
        now_ms = self.clock.wall_ms()
        budget = self.politeness.max_pages_per_host
        rows = []
        batch_seen: set[bytes] = set()
        for req in requests:
            if req.fingerprint not in batch_seen:
                batch_seen.add(req.fingerprint)
                self._seq += 1
                rows.append((req.fingerprint, self._seq, req.host, req.priority, req.to_json()))

        def step(conn: sqlite3.Connection) -> tuple[Offer, int, int]:
            job_queued = self._counts[QUEUED]
            evicted = over = 0
            host_queued: dict[str, int] = {}
            host_admitted: dict[str, int] = {}
            delta: Counter[str] = Counter()
            admitted: Counter[str] = Counter()
            added = refused = dropped = 0
            for fp, seq, host, priority, text in rows:
                if conn.execute(_SEEN, (fp,)).fetchone():
                    continue
                if host not in host_queued:
                    got = conn.execute(
                        "SELECT queued, admitted FROM frontier_hosts WHERE host=?", (host,)
                    ).fetchone()
                    host_queued[host] = int(got[0]) if got else 0
                    host_admitted[host] = int(got[1]) if got else 0
                if budget is not None and host_admitted[host] >= budget:
                    over += 1
                    continue
                full = (b.max_queued is not None and job_queued >= b.max_queued) or (
                    b.max_queued_per_host is not None and host_queued[host] >= b.max_queued_per_host
                )
                state = QUEUED
                if full and not drop:
                    if producer:
                        refused += 1
                        continue
                elif full:
                    dropped += 1
                    lowest = conn.execute(
                        "SELECT fp, priority FROM frontier_requests WHERE host=? AND state=? "
                        "ORDER BY priority ASC, seq DESC LIMIT 1",
                        (host, QUEUED),
                    ).fetchone()
                    if lowest is not None and lowest[1] < priority:
                        conn.execute(
                            "UPDATE frontier_requests SET state=?, reason=?, dead_at_ms=? "
                            "WHERE fp=?",
                            (DEAD, FRONTIER_FULL, now_ms, lowest[0]),
                        )
                        host_queued[host] -= 1
                        delta[host] -= 1
                        job_queued -= 1
                        evicted += 1
                    else:
                        state = DEAD
                dead = state != QUEUED
                conn.execute(
                    "INSERT INTO frontier_requests(fp, seq, host, priority, state, reason, "
                    "request, dead_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (fp, seq, host, priority, state, FRONTIER_FULL if dead else None, text,
                     now_ms if dead else None),
                )  # fmt: skip
                host_admitted[host] += 1
                admitted[host] += 1
                if state == QUEUED:
                    added += 1
                    host_queued[host] += 1
                    delta[host] += 1
                    job_queued += 1
            for host in admitted.keys() | delta.keys():
                override = self.politeness.configured(host)
                conn.execute(
                    "INSERT INTO frontier_hosts(host, queued, admitted, delay_ms, concurrency) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT(host) DO UPDATE SET "
                    "queued=queued+excluded.queued, admitted=admitted+excluded.admitted, "
                    "delay_ms=coalesce(delay_ms, excluded.delay_ms), "
                    "concurrency=coalesce(concurrency, excluded.concurrency)",
                    (
                        host,
                        delta[host],
                        admitted[host],
                        None if override is None else round(override.delay_s * 1000),
                        None if override is None else override.concurrency,
                    ),
                )
            if over:
                conn.execute(
                    "INSERT INTO frontier_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO "
                    "UPDATE SET value=CAST(value AS INTEGER) + CAST(excluded.value AS INTEGER)",
                    (OVER_BUDGET, str(over)),
                )
            return Offer(added, refused, dropped), evicted, over

        offer, evicted, over = self._tx(step)
        self._counts[QUEUED] += offer.queued - evicted
        self._counts[DEAD] += offer.dropped
        self._over_budget += over
        if offer.dropped:
            logger.warning(
                "frontier full: %d request(s) dead-lettered as frontier_full", offer.dropped
            )
        return offer

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
            elif conn.execute(_SEEN, row[:1]).fetchone() is None:
                over += 1
        return over
