"""What the two SQL stores share, written once for SQLite and PostgreSQL alike.

Both stores hold the same tables (``pages``, ``items``, ``dead_letters``, ``filtered``; DDL in
`crawlq.store.sqlite.schema` and `crawlq.store.postgres.schema`) and read and write them with
the same statements. They differ only in how a statement spells a parameter (``?`` or
``%s``), a JSON parameter and a NULL of a type (`Dialect`, here), and in which columns an
older schema has (`crawlq.store.sql.reads.Queries` reads NULL for the missing ones: a
read-only store may be older than this code).

* `crawlq.store.sql.writes`: the upserts of a flush and a reparse, and item data as JSON;
* `crawlq.store.sql.reads`: the keyset streams, the row layouts, the count reads and
  `crawlq.store.sql.reads.SqlReader`, the reading half of `crawlq.store.Store` that both
  backends subclass.

This package's own names are the spelling both halves use: `Dialect` and its two instances,
the page columns every schema version has, and the condition of a spider-error page.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawlq.records import SPIDER_ERROR_PREFIX

__all__ = ["PAGE_COLUMNS", "POSTGRES", "SPIDER_ERROR_SQL", "SQLITE", "Dialect"]

PAGE_COLUMNS = (
    "fingerprint, url, final_url, status, content_type, depth, title, fetched_at, size_bytes,"
    " elapsed_s, attempt, error, spider"
)
"""The page columns before ``body``, present in every schema version."""

SPIDER_ERROR_SQL = f"substr(error, 1, {len(SPIDER_ERROR_PREFIX)}) = '{SPIDER_ERROR_PREFIX}'"
"""The SQL condition (SQLite and PostgreSQL alike) of a page with a spider error; the SQL
stores' partial index ``pages_spider_errors`` has the same condition, so that selecting and
counting these pages does not read the others."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one backend spells what the shared statements leave open.

    Attributes:
        mark: A parameter: ``?`` (sqlite3) or ``%s`` (psycopg).
        json_mark: A parameter holding JSON text (PostgreSQL casts it to ``jsonb``).
        typed_nulls: Whether a selected NULL needs its type (``NULL::bytea``).
    """

    mark: str
    json_mark: str
    typed_nulls: bool

    def null(self, sql_type: str) -> str:
        """A NULL of ``sql_type`` (a PostgreSQL type name) as a selected column."""
        return f"NULL::{sql_type}" if self.typed_nulls else "NULL"

    def marks(self, n: int) -> str:
        """``n`` parameters, comma-separated."""
        return ", ".join([self.mark] * n)


SQLITE = Dialect("?", "?", typed_nulls=False)
POSTGRES = Dialect("%s", "%s::jsonb", typed_nulls=True)
