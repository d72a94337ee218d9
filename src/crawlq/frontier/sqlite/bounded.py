"""Pushing under queue bounds: a full queue refuses (``offer``) or drops the lowest priority.

With `crawlq.frontier.base.QueueBounds` set (``max_queued``, ``max_queued_per_host``), requests
are inserted row by row: each new one is checked against the host's page budget
(``max_pages_per_host``, as without bounds), then against the job's and its host's queue. A
full queue refuses a producer's request (``offer``: counted as refused, its fingerprint stays
unseen) or, with ``when_full="drop-lowest"``, dead-letters the lowest-priority queued request
of the host as ``frontier_full`` when the new one outranks it, else the new one.

`BoundedPushMixin` also holds the host and budget bookkeeping both push paths share.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence

from crawlq.frontier.base import FRONTIER_FULL, Offer
from crawlq.frontier.sqlite.core import FrontierFile, logger
from crawlq.frontier.sqlite.tables import DEAD, OVER_BUDGET, QUEUED
from crawlq.request import CrawlRequest

__all__ = ["BoundedPushMixin"]

SEEN = "SELECT 1 FROM frontier_requests WHERE fp=?"
"""Whether a fingerprint has a row (pushed before, in any state)."""

_UPSERT_HOST = (
    "INSERT INTO frontier_hosts(host, queued, admitted, delay_ms, concurrency) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT(host) DO UPDATE SET "
    "queued=queued+excluded.queued, admitted=admitted+excluded.admitted, "
    "delay_ms=coalesce(delay_ms, excluded.delay_ms), "
    "concurrency=coalesce(concurrency, excluded.concurrency)"
)


class BoundedPushMixin(FrontierFile):
    """The bounded push of `crawlq.frontier.sqlite.SqliteFrontier`, and push bookkeeping."""

    def _count_admitted(
        self, conn: sqlite3.Connection, host: str, queued: int, admitted: int
    ) -> None:
        """Add to ``host``'s queued and admitted counts; a new host row takes its override."""
        override = self.politeness.configured(host)
        conn.execute(
            _UPSERT_HOST,
            (
                host,
                queued,
                admitted,
                None if override is None else round(override.delay_s * 1000),
                None if override is None else override.concurrency,
            ),
        )

    @staticmethod
    def _count_over_budget(conn: sqlite3.Connection, over: int) -> None:
        """Add ``over`` new URLs that ``max_pages_per_host`` kept out to the file's count."""
        if over:
            conn.execute(
                "INSERT INTO frontier_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO "
                "UPDATE SET value=CAST(value AS INTEGER) + CAST(excluded.value AS INTEGER)",
                (OVER_BUDGET, str(over)),
            )

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
                if conn.execute(SEEN, (fp,)).fetchone():
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
                self._count_admitted(conn, host, delta[host], admitted[host])
            self._count_over_budget(conn, over)
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
