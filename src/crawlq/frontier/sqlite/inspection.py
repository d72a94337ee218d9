"""Inspection in the SQLite file (`crawlq.frontier.inspection.Inspection`).

Looking at one URL (``crawlq inspect``) and at the dead letters (list and replay).

These reads also work in a read-only look at a running crawl's file, and on a file older than
schema version 5, whose dead letters have no dead time (`FrontierFile._dead_at`). Dead letters
are read by fingerprint in chunks of `crawlq.frontier.sqlite.schema.CHUNK`; a replay requeues
each chunk in one transaction.
"""

from __future__ import annotations

import functools
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from crawlq.errors import FrontierError
from crawlq.frontier.inspection import EVERY_DEAD, DeadFilter, DeadLetter, Replay, UrlState
from crawlq.frontier.queue import FRONTIER_FULL, QueueBounds
from crawlq.frontier.sqlite.bounded import evict_lowest, host_counts, queue_full
from crawlq.frontier.sqlite.file import FrontierFile, logger
from crawlq.frontier.sqlite.schema import CHUNK, DEAD, QUEUED, STATE_NAMES
from crawlq.request import CrawlRequest

__all__ = ["SqliteInspection"]


class SqliteInspection(FrontierFile):
    """`inspect`, `dead_letters` and `replay_dead` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def inspect(self, fingerprint: bytes) -> UrlState:
        """See `crawlq.frontier.inspection.Inspection.inspect`."""

        def read() -> Any:
            return (
                self._db()
                .execute(
                    "SELECT r.state, r.request, r.attempt, r.ready_at_ms, r.worker_id, "
                    f"r.deadline_ms, r.reason, {self._dead_at('r')}, h.next_at_ms "
                    "FROM frontier_requests r LEFT JOIN frontier_hosts h ON h.host = r.host "
                    "WHERE r.fp = ?",
                    (bytes(fingerprint),),
                )
                .fetchone()
            )

        row = await self._run(read)
        if row is None:
            return UrlState(bytes(fingerprint), "unseen")
        state, request, attempt, ready_at, worker, deadline, reason, dead_at, next_at = row
        name = STATE_NAMES.get(state)
        if name is None:
            raise FrontierError(f"frontier {self.path}: unknown state {state!r}")
        return UrlState(
            fingerprint=bytes(fingerprint),
            state=name,
            request=None if name == "done" else CrawlRequest.from_json(request),
            attempts=attempt,
            ready_at_ms={"queued": next_at or 0, "delayed": ready_at}.get(name),
            worker_id=worker if name == "in_flight" else None,
            deadline_ms=deadline if name == "in_flight" else None,
            reason=None if name == "done" else reason,
            dead_at_ms=dead_at if name == "dead" else None,
        )

    async def dead_letters(self, where: DeadFilter = EVERY_DEAD) -> AsyncIterator[DeadLetter]:
        """See `crawlq.frontier.inspection.Inspection.dead_letters`: by fingerprint, in chunks."""
        after = b""
        while True:
            rows = await self._run(self._dead_chunk, after, where)
            for fp, host, request, attempt, reason, dead_at in rows:
                if where.matches(host, reason or "", dead_at):
                    letter = self._dead_letter(fp, request, reason, attempt, dead_at)
                    if letter is not None:
                        yield letter
            if len(rows) < CHUNK:
                return
            after = rows[-1][0]

    def _dead_chunk(self, after: bytes, where: DeadFilter) -> list[Any]:
        """Dead rows after fingerprint ``after``; narrowed in SQL by reason when given."""
        sql = (
            f"SELECT fp, host, request, attempt, reason, {self._dead_at()} "
            f"FROM frontier_requests WHERE state={DEAD} AND fp > ?"
        )
        params: list[Any] = [after]
        if where.reason is not None:
            sql += " AND reason = ?"
            params.append(where.reason)
        return self._db().execute(f"{sql} ORDER BY fp LIMIT ?", [*params, CHUNK]).fetchall()

    def _dead_letter(
        self, fp: bytes, request: str, reason: str | None, attempt: int, dead_at: int | None
    ) -> DeadLetter | None:
        try:
            return DeadLetter(CrawlRequest.from_json(request), reason or "", attempt, dead_at)
        except ValueError as exc:  # a file written by hand or by a broken crawlq
            logger.warning("skipping unreadable dead letter %s in %s: %s", fp.hex(), self.path, exc)
            return None

    async def replay_dead(
        self,
        where: DeadFilter = EVERY_DEAD,
        admit: Callable[[DeadLetter], bool] | None = None,
        bounds: QueueBounds | None = None,
    ) -> Replay:
        """See `crawlq.frontier.inspection.Inspection.replay_dead`.

        Dead letters are chosen chunk by chunk and each chunk is requeued in one transaction
        that requeues only rows still dead, under `bounds` as a producer's push.
        """
        total = Replay()
        async for chunk in self._chunks(self.dead_letters(where)):
            chosen = [d for d in chunk if admit is None or admit(d)]
            if chosen:
                revive = functools.partial(self._revive, chosen, bounds or self.bounds)
                done, moved = await self._run(self._tx, revive)
                self._counts[DEAD] -= moved
                self._counts[QUEUED] += moved
                total.add(done)
        if total.queued:
            self._wake()
        return total

    @staticmethod
    async def _chunks(letters: AsyncIterator[DeadLetter]) -> AsyncIterator[list[DeadLetter]]:
        chunk: list[DeadLetter] = []
        async for letter in letters:
            chunk.append(letter)
            if len(chunk) >= CHUNK:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def _revive(
        self, letters: Sequence[DeadLetter], bounds: QueueBounds, conn: sqlite3.Connection
    ) -> tuple[Replay, int]:
        """Requeue ``letters`` that are still dead, each under the queue bounds.

        Returns what was done, and how many requests went from dead to queued in all.
        """
        done = Replay()
        hosts: Counter[str] = Counter()  # queued change per host
        answered: Counter[str] = Counter()
        job_queued = self._counts[QUEUED]
        host_queued: dict[str, int] = {}
        now_ms = self.clock.wall_ms()
        evicted = 0
        for letter in letters:
            fp = letter.request.fingerprint
            row = conn.execute(
                f"SELECT host, priority FROM frontier_requests WHERE fp=? AND state={DEAD}",
                (fp,),
            ).fetchone()
            if row is None:
                continue
            host, priority = str(row[0]), int(row[1])
            if bounds.bounded:
                if host not in host_queued:
                    host_queued[host] = host_counts(conn, host)[0]
                if queue_full(bounds, job_queued, host_queued[host] + hosts[host]):
                    if bounds.when_full != "drop-lowest":
                        done.refused += 1
                        continue
                    done.dropped += 1
                    if not evict_lowest(conn, host, priority, now_ms):
                        conn.execute(
                            f"UPDATE frontier_requests SET reason=?, dead_at_ms=? WHERE fp=? "
                            f"AND state={DEAD}",
                            (FRONTIER_FULL, now_ms, fp),
                        )
                        continue
                    hosts[host] -= 1
                    job_queued -= 1
                    evicted += 1
            conn.execute(
                f"UPDATE frontier_requests SET state={QUEUED}, attempt=0, reason=NULL, "
                f"dead_at_ms=NULL WHERE fp=?",
                (fp,),
            )
            hosts[host] += 1
            answered[host] += 1
            job_queued += 1
            done.queued += 1
            done.by_reason[letter.reason] += 1
        self._adjust_hosts(conn, hosts, Counter())
        self._host_answered(conn, answered)  # replayed hosts start afresh: breaker closed
        if done.dropped:
            logger.warning(
                "frontier full: %d request(s) dead-lettered as frontier_full", done.dropped
            )
        return done, done.queued - evicted
