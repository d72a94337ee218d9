"""The SQL the two SQL stores share, written once for SQLite and PostgreSQL alike.

Both stores hold the same tables (``pages``, ``items``, ``dead_letters``, ``filtered``; DDL in
``schema.sql`` and `crawlq.store.postgres.schema`) and read and write them with the same
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
    "PAGE_COLUMNS",
    "POSTGRES",
    "SPIDER_ERROR_SQL",
    "SQLITE",
    "CountQueries",
    "Dialect",
    "Statement",
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
    """The upserts of one dialect; each takes its record's columns in table order.

    Pages, dead letters and filtered records take the batch's ``job``
    (`crawlq.store.batch.ResultBatch.job`)
    last; an upsert replaces it with the rest of the row, so a row counts for the job that
    wrote it last.
    """

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
    request, job)
VALUES ({d.marks(20)})
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, final_url = excluded.final_url, status = excluded.status,
    content_type = excluded.content_type, depth = excluded.depth, title = excluded.title,
    fetched_at = excluded.fetched_at, size_bytes = excluded.size_bytes,
    elapsed_s = excluded.elapsed_s, attempt = excluded.attempt, error = excluded.error,
    spider = excluded.spider, body = excluded.body, warc_file = excluded.warc_file,
    warc_offset = excluded.warc_offset, canonical_url = excluded.canonical_url,
    referrer = excluded.referrer, request = excluded.request, job = excluded.job
""",
            insert_item=f"""
INSERT INTO items (fingerprint, idx, url, spider, data, created_at)
VALUES ({m}, {m}, {m}, {m}, {d.json_mark}, {m})
""",
            upsert_dead=f"""
INSERT INTO dead_letters (fingerprint, url, reason, detail, attempts, depth, at, referrer, job)
VALUES ({d.marks(9)})
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, detail = excluded.detail,
    attempts = excluded.attempts, depth = excluded.depth, at = excluded.at,
    referrer = excluded.referrer, job = excluded.job
""",
            upsert_filtered=f"""
INSERT INTO filtered (fingerprint, url, reason, depth, at, job) VALUES ({d.marks(6)})
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, depth = excluded.depth, at = excluded.at,
    job = excluded.job
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


Statement = tuple[str, tuple[Any, ...]]
"""One SQL statement and its parameters."""


@dataclass(frozen=True, slots=True)
class CountQueries:
    """The reads of ``Store.counts``, for the whole store or one job, run in one snapshot.

    Build with `CountQueries.of`; `store_counts` turns their rows into a `StoreCounts`.

    Attributes:
        totals: One row: pages, items, dead letters, filtered URLs.
        groups: Pages per status, dead letters per reason, filtered URLs per reason.
        spider_errors: Spider-error pages per kind text (the text between the prefix and the
            next ``:``), the rows `crawlq.store.outcomes.spider_error_counts` takes.
    """

    totals: Statement
    groups: tuple[Statement, Statement, Statement]
    spider_errors: Statement

    @classmethod
    def of(
        cls, d: Dialect, kind_sql: str, job: str | None, *, has_job: bool = True
    ) -> CountQueries:
        """The count reads spelled for ``d``.

        Args:
            d: The backend's spelling.
            kind_sql: The backend's SQL expression of a spider-error page's kind text.
            job: Count only what this job wrote: its pages, dead letters and filtered
                records (the ``job`` column), and the items of its pages and dead letters.
                None: the whole
                store, rows of every job and of none.
            has_job: Whether the tables have the ``job`` column (store schema 6 on). Without
                it no row belongs to a job, so a job's counts are all 0.
        """
        params: tuple[Any, ...] = ()
        if job is None:
            cond = ""
        elif has_job:
            cond, params = f"job = {d.mark}", (job,)
        else:
            cond = "1 = 0"
        where = f" WHERE {cond}" if cond else ""
        items = (
            f" WHERE fingerprint IN (SELECT fingerprint FROM pages{where}"
            f" UNION SELECT fingerprint FROM dead_letters{where})"
            if cond
            else ""
        )
        totals = (
            f"SELECT (SELECT count(*) FROM pages{where}), (SELECT count(*) FROM items{items}),"
            f" (SELECT count(*) FROM dead_letters{where}), (SELECT count(*) FROM filtered{where})"
        )
        errors = f"{SPIDER_ERROR_SQL} AND {cond}" if cond else SPIDER_ERROR_SQL
        return cls(
            totals=(totals, params * 5),
            groups=(
                (f"SELECT status, count(*) FROM pages{where} GROUP BY status", params),
                (f"SELECT reason, count(*) FROM dead_letters{where} GROUP BY reason", params),
                (f"SELECT reason, count(*) FROM filtered{where} GROUP BY reason", params),
            ),
            spider_errors=(
                f"SELECT {kind_sql}, count(*) FROM pages WHERE {errors} GROUP BY 1",
                params,
            ),
        )


def store_counts(
    totals: Sequence[Any],
    groups: Sequence[Sequence[Sequence[Any]]],
    spider_errors: Sequence[Sequence[Any]],
) -> StoreCounts:
    """`crawlq.store.outcomes.StoreCounts` from the rows of the count queries.

    ``totals`` is the row of `CountQueries.totals`, ``groups`` the rows of each of
    `CountQueries.groups`, ``spider_errors`` the rows of `CountQueries.spider_errors`.
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
