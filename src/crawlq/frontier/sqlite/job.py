"""The job's record in the SQLite file (`crawlq.frontier.job.JobRecord`): its settings.

The job's settings are one JSON row of ``frontier_meta`` (key ``job_settings``), written once
by the first process that proposes them.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from crawlq.frontier.sqlite.file import FrontierFile

__all__ = ["SqliteJobRecord"]


class SqliteJobRecord(FrontierFile):
    """`job_settings` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def job_settings(self, proposed: dict[str, Any] | None) -> dict[str, Any] | None:
        """See `crawlq.frontier.job.JobRecord.job_settings`."""

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
