"""The SQL the two SQL stores share, written once for SQLite and PostgreSQL alike.

Both stores hold the same tables (``pages``, ``items``, ``dead_letters``, ``filtered``; DDL in
``schema.sql`` and `crawlq.store.postgres_schema`) and read and write them with the same
statements. They differ only in how a statement spells a parameter (``?`` or ``%s``), a
JSON parameter and a NULL of a type (`Dialect`), and in which columns an older schema has
(`crawlq.store.reads.Queries` reads NULL for the missing ones: a read-only store may be
older than this code).

Reads select their columns in the layouts of `crawlq.store.rows`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crawlq.records import (
    SPIDER_ERROR_PREFIX,
    ItemRecord,
)
from crawlq.store.outcomes import StoreCounts, spider_error_counts

__all__ = [
    "COUNT_GROUPS",
    "COUNT_TOTALS",
    "PAGE_COLUMNS",
    "POSTGRES",
    "SPIDER_ERROR_SQL",
    "SQLITE",
    "Dialect",
    "Writes",
    "item_json",
    "store_counts",
]

PAGE_COLUMNS = (
    "fingerprint, url, final_url, status, content_type, depth, title, fetched_at, size_bytes,"
    " elapsed_s, attempt, error, spider"
)
"""The page columns before ``body``, present in every schema version."""


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


@dataclass(frozen=True, slots=True)
class Writes:
    """The upserts of one dialect; each takes its record's columns in table order."""

    upsert_page: str
    insert_item: str
    upsert_dead: str
    upsert_filtered: str

    @classmethod
    def of(cls, d: Dialect) -> Writes:
        """The statements spelled for ``d``."""
        m = d.mark
        return cls(
            upsert_page=f"""
INSERT INTO pages ({PAGE_COLUMNS}, body, warc_file, warc_offset, canonical_url, referrer,
    request)
VALUES ({d.marks(19)})
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, final_url = excluded.final_url, status = excluded.status,
    content_type = excluded.content_type, depth = excluded.depth, title = excluded.title,
    fetched_at = excluded.fetched_at, size_bytes = excluded.size_bytes,
    elapsed_s = excluded.elapsed_s, attempt = excluded.attempt, error = excluded.error,
    spider = excluded.spider, body = excluded.body, warc_file = excluded.warc_file,
    warc_offset = excluded.warc_offset, canonical_url = excluded.canonical_url,
    referrer = excluded.referrer, request = excluded.request
""",
            insert_item=f"""
INSERT INTO items (fingerprint, idx, url, spider, data, created_at)
VALUES ({m}, {m}, {m}, {m}, {d.json_mark}, {m})
""",
            upsert_dead=f"""
INSERT INTO dead_letters (fingerprint, url, reason, detail, attempts, depth, at, referrer)
VALUES ({d.marks(8)})
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, detail = excluded.detail,
    attempts = excluded.attempts, depth = excluded.depth, at = excluded.at,
    referrer = excluded.referrer
""",
            upsert_filtered=f"""
INSERT INTO filtered (fingerprint, url, reason, depth, at) VALUES ({d.marks(5)})
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, depth = excluded.depth, at = excluded.at
""",
        )


def item_json(item: ItemRecord) -> str:
    """An item's data as compact JSON text, keys in the spider's order.

    Raises:
        ValueError: The data is not a dict, or not JSON-serialisable (NaN and infinity
            included); the message names the item.
    """
    if not isinstance(item.data, dict):
        raise ValueError(f"item {item.index} of {item.url!r}: data must be a dict")
    try:
        return json.dumps(item.data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"item {item.index} of {item.url!r} is not JSON-serialisable: {exc}"
        ) from exc


COUNT_TOTALS = (
    "SELECT (SELECT count(*) FROM pages), (SELECT count(*) FROM items),"
    " (SELECT count(*) FROM dead_letters), (SELECT count(*) FROM filtered)"
)
"""One row: pages, items, dead letters, filtered URLs."""

COUNT_GROUPS = (
    "SELECT status, count(*) FROM pages GROUP BY status",
    "SELECT reason, count(*) FROM dead_letters GROUP BY reason",
    "SELECT reason, count(*) FROM filtered GROUP BY reason",
)
"""Pages per status, dead letters per reason, filtered URLs per reason."""


def store_counts(
    totals: Sequence[Any],
    groups: Sequence[Sequence[Sequence[Any]]],
    spider_errors: Sequence[Sequence[Any]],
) -> StoreCounts:
    """`crawlq.store.base.StoreCounts` from the rows of the count queries.

    ``totals`` is the row of `COUNT_TOTALS`, ``groups`` the rows of each of `COUNT_GROUPS`,
    ``spider_errors`` the backend's spider errors by type
    (`crawlq.store.outcomes.spider_error_counts`).
    """
    by_status, by_dead, by_filtered = ({row[0]: int(row[1]) for row in rows} for rows in groups)
    return StoreCounts(
        pages=totals[0],
        items=totals[1],
        dead=totals[2],
        filtered=totals[3],
        pages_by_status=by_status,
        dead_by_reason=by_dead,
        filtered_by_reason=by_filtered,
        spider_errors_by_type=spider_error_counts(spider_errors),
    )


SPIDER_ERROR_SQL = f"substr(error, 1, {len(SPIDER_ERROR_PREFIX)}) = '{SPIDER_ERROR_PREFIX}'"
"""The SQL condition (SQLite and PostgreSQL alike) of a page with a spider error; the SQL
stores' partial index ``pages_spider_errors`` has the same condition, so that selecting and
counting these pages does not read the others."""
