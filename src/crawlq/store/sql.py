"""The SQL the two SQL stores share, written once for SQLite and PostgreSQL alike.

Both stores hold the same tables (``pages``, ``items``, ``dead_letters``, ``filtered``; DDL in
``schema.sql`` and `crawlq.store.postgres_schema`) and read and write them with the same
statements. They differ only in how a statement spells a parameter (``?`` or ``%s``), a
JSON parameter and a NULL of a type (`Dialect`), and in which columns an older schema has
(`Reads` reads NULL for the missing ones: a read-only store may be older than this code).

Column orders follow the row layouts of `crawlq.store.base` (`page_from_row`,
`item_from_row`, `dead_from_row`, `filtered_from_row`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crawlq.records import ItemRecord
from crawlq.store.base import SPIDER_ERROR_SQL, StoreCounts, spider_error_counts
from crawlq.store.keyset import BODY_CHUNK_ROWS, CHUNK_ROWS, Keyset

__all__ = [
    "COUNT_GROUPS",
    "COUNT_TOTALS",
    "PAGE_COLUMNS",
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "Reads",
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


class Reads:
    """The read queries of one store: its dialect and the schema version it reads.

    Args:
        dialect: The backend's spelling.
        version: The schema version of the store's tables (1..); columns added later are
            read as NULL.
    """

    def __init__(self, dialect: Dialect, version: int) -> None:
        self.dialect = dialect
        self.version = version

    def page_columns(self, *, with_body: bool) -> str:
        """Every page column in `crawlq.store.base.page_from_row` order."""
        null = self.dialect.null
        body = "body" if with_body else null("bytea")
        v = self.version
        warc = "warc_file, warc_offset" if v >= 2 else f"{null('text')}, {null('bigint')}"
        canonical = "canonical_url" if v >= 3 else null("text")
        referrer = "referrer" if v >= 4 else null("text")
        request = "request" if v >= 5 else null("text")
        return f"{PAGE_COLUMNS}, {body}, {warc}, {canonical}, {referrer}, {request}"

    def dead_columns(self) -> str:
        """Every dead-letter column in `crawlq.store.base.dead_from_row` order."""
        referrer = "referrer" if self.version >= 4 else self.dialect.null("text")
        return f"at, fingerprint, url, reason, detail, attempts, depth, {referrer}"

    def pages(self, *, since: float | None, with_body: bool, spider_errors_only: bool) -> Keyset:
        """Pages by ``(fetched_at, fingerprint)`` (`crawlq.store.base.Store.pages`)."""
        m = self.dialect.mark
        select = f"SELECT {self.page_columns(with_body=with_body)} FROM pages"
        errors = [SPIDER_ERROR_SQL] if spider_errors_only else []
        first = ([f"fetched_at >= {m}"] if since is not None else []) + errors
        return Keyset(
            first=_where(select, first, f"ORDER BY fetched_at, fingerprint LIMIT {m}"),
            params=() if since is None else (float(since),),
            later=_where(
                select,
                [f"(fetched_at, fingerprint) > ({m}, {m})", *errors],
                f"ORDER BY fetched_at, fingerprint LIMIT {m}",
            ),
            key=(7, 0),
            chunk_rows=BODY_CHUNK_ROWS if with_body else CHUNK_ROWS,
        )

    def items(self, *, since: float | None) -> Keyset:
        """Items by ``(created_at, fingerprint, idx)`` (`crawlq.store.base.Store.items`)."""
        m = self.dialect.mark
        select = "SELECT created_at, fingerprint, idx, url, spider, data FROM items"
        order = f"ORDER BY created_at, fingerprint, idx LIMIT {m}"
        return Keyset(
            first=_where(select, [f"created_at >= {m}"] if since is not None else [], order),
            params=() if since is None else (float(since),),
            later=_where(select, [f"(created_at, fingerprint, idx) > ({m}, {m}, {m})"], order),
            key=(0, 1, 2),
        )

    def dead(self) -> Keyset:
        """Dead letters by ``(at, fingerprint)`` (`crawlq.store.base.Store.dead`)."""
        return self._by_time(f"SELECT {self.dead_columns()} FROM dead_letters")

    def filtered(self) -> Keyset:
        """Filtered URLs by ``(at, fingerprint)`` (`crawlq.store.base.Store.filtered`)."""
        return self._by_time("SELECT at, fingerprint, url, reason, depth FROM filtered")

    def _by_time(self, select: str) -> Keyset:
        m = self.dialect.mark
        order = f"ORDER BY at, fingerprint LIMIT {m}"
        later = _where(select, [f"(at, fingerprint) > ({m}, {m})"], order)
        return Keyset(first=f"{select} {order}", params=(), later=later, key=(0, 1))

    def lookup(self, where: str) -> tuple[str, str, str, str]:
        """The four reads of `crawlq.store.base.Store.lookup`, each narrowed by ``where``.

        Pages (no body), ``(fingerprint, count)`` of items, dead letters, filtered records:
        the rows `crawlq.store.base.outcomes_from_rows` takes.
        """
        return (
            f"SELECT {self.page_columns(with_body=False)} FROM pages {where}",
            f"SELECT fingerprint, count(*) FROM items {where} GROUP BY fingerprint",
            f"SELECT {self.dead_columns()} FROM dead_letters {where}",
            f"SELECT at, fingerprint, url, reason, depth FROM filtered {where}",
        )


def _where(select: str, conditions: Sequence[str], order: str) -> str:
    if not conditions:
        return f"{select} {order}"
    return f"{select} WHERE {' AND '.join(conditions)} {order}"


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
    (`crawlq.store.base.spider_error_counts`).
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
