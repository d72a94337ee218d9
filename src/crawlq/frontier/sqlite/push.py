"""Pushing requests: dedup by fingerprint, the host page budget and the queue bounds.

`PushMixin.push` and `PushMixin.offer` insert each new fingerprint as a queued row and count
it on its host row (``queued``, and ``admitted`` for ``max_pages_per_host``), in one
transaction per call. Without `crawlq.frontier.values.QueueBounds` rows are inserted host by
host with ``INSERT OR IGNORE``; with bounds, row by row (`crawlq.frontier.sqlite.bounded`),
so that a full queue can refuse (``offer``) or dead-letter the lowest-priority request as
``frontier_full``.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Sequence

from crawlq.frontier.sqlite.bounded import SEEN, BoundedPushMixin
from crawlq.frontier.sqlite.tables import QUEUED
from crawlq.frontier.values import Offer
from crawlq.request import CrawlRequest

__all__ = ["PushMixin"]

_INSERT_REQUEST = (
    "INSERT OR IGNORE INTO frontier_requests(fp, seq, host, priority, state, request) "
    f"VALUES (?, ?, ?, ?, {QUEUED}, ?)"
)


class PushMixin(BoundedPushMixin):
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
