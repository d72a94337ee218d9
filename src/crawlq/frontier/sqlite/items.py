"""Item keys in the SQLite file (`crawlq.frontier.items.ItemKeys`): ``frontier_item_keys``.

The table is created by ``schema.sql`` (``CREATE TABLE IF NOT EXISTS`` on every open), so a
file of an earlier version gains it without a migration step.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from crawlq.frontier.sqlite.file import FrontierFile

__all__ = ["SqliteItemKeys"]


class SqliteItemKeys(FrontierFile):
    """`claim_item_keys` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def claim_item_keys(self, keys: Sequence[bytes], owner: bytes) -> list[bool]:
        """See `crawlq.frontier.items.ItemKeys.claim_item_keys`."""
        if len(owner) != 20 or any(len(k) != 20 for k in keys):
            raise ValueError("owner and keys must be 20-byte digests")
        wanted = list(keys)

        def step(conn: sqlite3.Connection) -> list[bool]:
            out = []
            for key in wanted:
                conn.execute(
                    "INSERT OR IGNORE INTO frontier_item_keys(key, owner) VALUES (?, ?)",
                    (key, owner),
                )
                row = conn.execute(
                    "SELECT owner FROM frontier_item_keys WHERE key=?", (key,)
                ).fetchone()
                out.append(bytes(row[0]) == owner)
            return out

        if not wanted:
            return []
        return await self._run(self._tx, step)
