"""Looking at one URL (``crawlq inspect``) and at the dead letters (list and replay).

These reads also work in a read-only look at a running crawl's file, and on a file older than
schema version 5, whose dead letters have no dead time (`FrontierFile._dead_at`). Dead letters
are read by fingerprint in chunks of `crawlq.frontier.sqlite.tables.CHUNK`; a replay requeues
each chunk in one transaction.
"""

from __future__ import annotations

import functools
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from crawlq.errors import FrontierError
from crawlq.frontier.base import EVERY_DEAD, DeadFilter, DeadLetter, UrlState
from crawlq.frontier.sqlite.core import FrontierFile, logger
from crawlq.frontier.sqlite.tables import CHUNK, DEAD, QUEUED, STATE_NAMES
from crawlq.request import CrawlRequest

__all__ = ["InspectionMixin"]


class InspectionMixin(FrontierFile):
    """`inspect`, `dead_letters` and `replay_dead` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def inspect(self, fingerprint: bytes) -> UrlState:
        """See `crawlq.frontier.base.Frontier.inspect`."""

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
        """See `crawlq.frontier.base.Frontier.dead_letters`. Read by fingerprint, in chunks."""
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
    ) -> int:
        """See `crawlq.frontier.base.Frontier.replay_dead`.

        Dead letters are chosen chunk by chunk and each chunk is requeued in one transaction
        that requeues only rows still dead.
        """
        replayed = 0
        async for chunk in self._chunks(self.dead_letters(where)):
            chosen = [d.request for d in chunk if admit is None or admit(d)]
            if chosen:
                revived = await self._run(self._tx, functools.partial(self._revive, chosen))
                self._counts[DEAD] -= revived
                self._counts[QUEUED] += revived
                replayed += revived
        if replayed:
            self._wake()
        return replayed

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

    def _revive(self, requests: Sequence[CrawlRequest], conn: sqlite3.Connection) -> int:
        hosts: Counter[str] = Counter()
        for request in requests:
            cur = conn.execute(
                f"UPDATE frontier_requests SET state={QUEUED}, attempt=0, reason=NULL, "
                f"dead_at_ms=NULL "
                f"WHERE fp=? AND state={DEAD} RETURNING host",
                (request.fingerprint,),
            )
            for (host,) in cur:
                hosts[host] += 1
        self._adjust_hosts(conn, hosts, Counter())
        self._host_answered(conn, hosts)  # replayed hosts start afresh: breaker closed
        return hosts.total()
