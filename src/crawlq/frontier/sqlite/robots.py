"""The shared robots.txt in the SQLite file (`crawlq.frontier.robots.SharedRobots`).

The job's robots.txt cache: one record per origin, fetched once by whoever claims it.

Rows of ``frontier_robots``: the record (`crawlq.frontier.robots.RobotsRecord`, NULL while only
claimed) and the current claim (holder, until Unix ms). An unreadable record is logged once
per origin and treated as missing, so it is fetched again.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from crawlq.frontier.robots import RobotsRecord
from crawlq.frontier.sqlite.file import FrontierFile, logger

__all__ = ["SqliteRobots"]


class SqliteRobots(FrontierFile):
    """`robots_get`, `robots_claim` and `robots_put` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def robots_get(self, origin: str) -> RobotsRecord | None:
        """See `crawlq.frontier.robots.SharedRobots.robots_get`."""
        row = await self._run(
            lambda: (
                self._db()
                .execute("SELECT record FROM frontier_robots WHERE origin=?", (origin,))
                .fetchone()
            )
        )
        return None if row is None else self._robots_record(origin, row[0])

    def _robots_record(self, origin: str, data: Any) -> RobotsRecord | None:
        if data is None:
            return None
        try:
            return RobotsRecord.from_bytes(bytes(data))
        except (ValueError, TypeError) as exc:
            if origin not in self._robots_warned:
                self._robots_warned.add(origin)
                logger.warning("unreadable robots.txt record of %s, refetching: %s", origin, exc)
            return None

    async def robots_claim(
        self, origin: str, holder: str, ttl_s: float, *, force: bool = False
    ) -> tuple[RobotsRecord | None, bool]:
        """See `crawlq.frontier.robots.SharedRobots.robots_claim`."""
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        now = self.clock.wall_ms()
        until = now + max(1, round(ttl_s * 1000))

        def step(conn: sqlite3.Connection) -> tuple[RobotsRecord | None, bool]:
            row = conn.execute(
                "SELECT record, claim_holder, claim_until_ms FROM frontier_robots WHERE origin=?",
                (origin,),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO frontier_robots(origin, claim_holder, claim_until_ms) "
                    "VALUES (?, ?, ?)",
                    (origin, holder, until),
                )
                return None, True
            record = self._robots_record(origin, row[0])
            if record is not None and record.fresh_at(now) and not force:
                return record, False
            if row[1] is not None and row[1] != holder and (row[2] or 0) > now:
                return record, False
            conn.execute(
                "UPDATE frontier_robots SET claim_holder=?, claim_until_ms=? WHERE origin=?",
                (holder, until, origin),
            )
            return record, True

        return await self._run(self._tx, step)

    async def robots_put(self, origin: str, record: RobotsRecord) -> None:
        """See `crawlq.frontier.robots.SharedRobots.robots_put`."""
        data = record.to_bytes()

        def step(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO frontier_robots(origin, record) VALUES (?, ?) "
                "ON CONFLICT(origin) DO UPDATE SET record=excluded.record, "
                "claim_holder=NULL, claim_until_ms=NULL",
                (origin, data),
            )

        await self._run(self._tx, step)
        self._robots_warned.discard(origin)
