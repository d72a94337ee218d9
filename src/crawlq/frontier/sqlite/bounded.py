"""Pushing under queue bounds: a full queue refuses (``offer``) or drops the lowest priority.

With `crawlq.frontier.queue.QueueBounds` set (``max_queued``, ``max_queued_per_host``), requests
are inserted row by row: each new one is checked against the host's page budget
(``max_pages_per_host``, as without bounds), then against the job's and its host's queue. A
full queue refuses a producer's request (``offer``: counted as refused, its fingerprint stays
unseen) or, with ``when_full="drop-lowest"``, dead-letters the lowest-priority queued request
of the host as ``frontier_full`` when the new one outranks it, else the new one.

`BoundedPush` also holds the host and budget bookkeeping both push paths share.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from crawlq.frontier.queue import FRONTIER_FULL, Offer, QueueBounds
from crawlq.frontier.sqlite.file import FrontierFile, logger
from crawlq.frontier.sqlite.schema import DEAD, OVER_BUDGET, QUEUED
from crawlq.request import CrawlRequest

__all__ = ["BoundedPush", "evict_lowest", "host_counts", "queue_full"]

SEEN = "SELECT 1 FROM frontier_requests WHERE fp=?"
"""Whether a fingerprint has a row (pushed before, in any state)."""

_UPSERT_HOST = (
    "INSERT INTO frontier_hosts(host, queued, admitted, delay_ms, concurrency) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT(host) DO UPDATE SET "
    "queued=queued+excluded.queued, admitted=admitted+excluded.admitted, "
    "delay_ms=coalesce(delay_ms, excluded.delay_ms), "
    "concurrency=coalesce(concurrency, excluded.concurrency)"
)


class BoundedPush(FrontierFile):
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
        """`push`/`offer` under `bounds` (`crawlq.frontier.queue.QueueBounds`), row by row.

        The page budget (``max_pages_per_host``) is checked first, as in `_push_sync`.
        """
        now_ms = self.clock.wall_ms()
        rows = []
        batch_seen: set[bytes] = set()
        for req in requests:
            if req.fingerprint not in batch_seen:
                batch_seen.add(req.fingerprint)
                self._seq += 1
                rows.append((req.fingerprint, self._seq, req.host, req.priority, req.to_json()))

        def step(conn: sqlite3.Connection) -> _Tally:
            tally = _Tally(self._counts[QUEUED])
            for row in rows:
                self._admit_bounded(conn, row, tally, producer, now_ms)
            for host in tally.admitted.keys() | tally.delta.keys():
                self._count_admitted(conn, host, tally.delta[host], tally.admitted[host])
            self._count_over_budget(conn, tally.over)
            return tally

        tally = self._tx(step)
        offer = Offer(tally.added, tally.refused, tally.dropped)
        self._counts[QUEUED] += offer.queued - tally.evicted
        self._counts[DEAD] += offer.dropped
        self._over_budget += tally.over
        if offer.dropped:
            logger.warning(
                "frontier full: %d request(s) dead-lettered as frontier_full", offer.dropped
            )
        return offer

    def _admit_bounded(
        self,
        conn: sqlite3.Connection,
        row: tuple[bytes, int, str, int, str],
        tally: _Tally,
        producer: bool,
        now_ms: int,
    ) -> None:
        """Insert one new request row unless its budget or a full queue keeps it out."""
        fp, _, host, priority, _ = row
        if conn.execute(SEEN, (fp,)).fetchone():
            return
        if host not in tally.host_queued:
            tally.host_queued[host], tally.host_admitted[host] = host_counts(conn, host)
        budget = self.politeness.max_pages_per_host
        if budget is not None and tally.host_admitted[host] >= budget:
            tally.over += 1
            return
        state = QUEUED
        if self._full(tally.job_queued, tally.host_queued[host]):
            if self.bounds.when_full != "drop-lowest":
                if producer:
                    tally.refused += 1
                    return
            else:
                tally.dropped += 1
                if evict_lowest(conn, host, priority, now_ms):
                    tally.queue(host, -1)
                    tally.evicted += 1
                else:
                    state = DEAD
        _insert(conn, row, state, now_ms)
        tally.host_admitted[host] += 1
        tally.admitted[host] += 1
        if state == QUEUED:
            tally.added += 1
            tally.queue(host, 1)

    def _full(self, job_queued: int, host_queued: int) -> bool:
        """Whether the job's queue or the host's is at its bound."""
        return queue_full(self.bounds, job_queued, host_queued)


def queue_full(b: QueueBounds, job_queued: int, host_queued: int) -> bool:
    """Whether the job's queue or the host's is at its bound (a push's, a replay's)."""
    return (b.max_queued is not None and job_queued >= b.max_queued) or (
        b.max_queued_per_host is not None and host_queued >= b.max_queued_per_host
    )


@dataclass(slots=True)
class _Tally:
    """What one bounded push did so far, and the queue counts it moved."""

    job_queued: int
    host_queued: dict[str, int] = field(default_factory=dict)
    host_admitted: dict[str, int] = field(default_factory=dict)
    delta: Counter[str] = field(default_factory=Counter)  # queued change per host
    admitted: Counter[str] = field(default_factory=Counter)  # rows inserted per host
    added: int = 0
    refused: int = 0
    dropped: int = 0
    evicted: int = 0
    over: int = 0

    def queue(self, host: str, n: int) -> None:
        """Count ``n`` more (or fewer) queued requests of ``host``."""
        self.host_queued[host] += n
        self.delta[host] += n
        self.job_queued += n


def host_counts(conn: sqlite3.Connection, host: str) -> tuple[int, int]:
    """The host's queued and admitted counts (0 and 0 for a host not seen yet)."""
    got = conn.execute("SELECT queued, admitted FROM frontier_hosts WHERE host=?", (host,))
    row = got.fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def evict_lowest(conn: sqlite3.Connection, host: str, priority: int, now_ms: int) -> bool:
    """Dead-letter the host's lowest-priority queued request when ``priority`` outranks it.

    Among equals the newest goes; its reason is ``frontier_full``. Returns whether one went.
    """
    lowest = conn.execute(
        "SELECT fp, priority FROM frontier_requests WHERE host=? AND state=? "
        "ORDER BY priority ASC, seq DESC LIMIT 1",
        (host, QUEUED),
    ).fetchone()
    if lowest is None or lowest[1] >= priority:
        return False
    conn.execute(
        "UPDATE frontier_requests SET state=?, reason=?, dead_at_ms=? WHERE fp=?",
        (DEAD, FRONTIER_FULL, now_ms, lowest[0]),
    )
    return True


def _insert(
    conn: sqlite3.Connection, row: tuple[bytes, int, str, int, str], state: int, now_ms: int
) -> None:
    """Insert a new request row, queued or (dropped) dead as ``frontier_full``."""
    fp, seq, host, priority, text = row
    dead = state != QUEUED
    conn.execute(
        "INSERT INTO frontier_requests(fp, seq, host, priority, state, reason, "
        "request, dead_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (fp, seq, host, priority, state, FRONTIER_FULL if dead else None, text,
         now_ms if dead else None),
    )  # fmt: skip
