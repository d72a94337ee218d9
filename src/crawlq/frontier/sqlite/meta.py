"""What the file says about the job as a whole: its settings and its counts (`stats`).

The job's settings are one JSON row of ``frontier_meta`` (key ``job_settings``), written once
by the first process that proposes them. Counts per state are kept in memory by the owner
(`FrontierFile._counts`); the busiest hosts and the hosts in backoff are read from the file.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from crawlq.frontier.sqlite.core import FrontierFile
from crawlq.frontier.sqlite.tables import DEAD, DELAYED, DONE, LEASED, QUEUED
from crawlq.frontier.values import FrontierStats, HostBackoff, HostStats, backoff_state

__all__ = ["MetaMixin"]


class MetaMixin(FrontierFile):
    """`job_settings` and `stats` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def job_settings(self, proposed: dict[str, Any] | None) -> dict[str, Any] | None:
        """See `crawlq.frontier.base.Frontier.job_settings`."""

        def step(conn: sqlite3.Connection) -> dict[str, Any] | None:
            if proposed is not None:
                conn.execute(
                    "INSERT OR IGNORE INTO frontier_meta(key, value) VALUES ('job_settings', ?)",
                    (json.dumps(proposed, sort_keys=True),),
                )
            row = conn.execute(
                "SELECT value FROM frontier_meta WHERE key='job_settings'"
            ).fetchone()
            return None if row is None else dict(json.loads(row[0]))

        if proposed is None:  # a read: also in a read-only look
            return await self._run(lambda: step(self._db()))
        return await self._run(self._tx, step)

    async def stats(self) -> FrontierStats:
        """See `crawlq.frontier.base.Frontier.stats`."""

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
