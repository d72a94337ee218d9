r"""The PostgreSQL store's typed items table (``--items-table NAME``): DDL, check, rows.

With a declared item type (`crawlq.items.schema.ItemTable`), every item is written twice in
the flush's one transaction: as today into the JSONB ``items`` table (what ``export`` and
``inspect`` read), and as one row of the typed table, one column per field:

    crawlq_fingerprint bytea, crawlq_index integer, crawlq_job text, crawlq_url text,
    crawlq_stored_at timestamptz, <field> <type> ...
    PRIMARY KEY (crawlq_fingerprint, crawlq_index)

Column types follow `crawlq.items.schema.POSTGRES_TYPES`; a field whose annotation is not
``Optional`` is ``NOT NULL``. `ensure_table` creates the table when it is missing and
refuses one that exists with other columns, listing the difference; it never alters or
drops a table. Writes follow the page: a page, dead letter or filtered record written again
deletes its fingerprint's typed rows before the new items go in, so a page parsed again (a
redelivery, a re-crawl, ``crawlq reparse``) that now yields fewer items leaves none of the
old ones.

An item whose value does not fit its field (`crawlq.items.schema.WrongType`: a text where
the field is an int, a required field missing) keeps its JSONB row but gets no typed row;
one warning names the table, the item (page URL and index) and the field, never the value.
With crawlq's validation of the declared type in front (`crawlq.items`), such an item is
dropped before it reaches the store, so this is the last line, not the usual path.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb

from crawlq.errors import ConfigError
from crawlq.items.schema import KEY_COLUMNS, POSTGRES_TYPES, ItemTable, WrongType
from crawlq.records import ItemRecord
from crawlq.store.postgres.pool import Conn, Target

__all__ = [
    "STORE_TABLES",
    "TypedRows",
    "ensure_table",
    "expected_columns",
    "set_jobs_from_pages",
]

logger = logging.getLogger("crawlq.store.postgres")

STORE_TABLES = frozenset({"pages", "items", "dead_letters", "filtered", "outcomes", "store_meta"})
"""The store's own tables, which ``--items-table`` may not name."""

_KEY_TYPES = tuple(
    zip(
        KEY_COLUMNS,
        ("bytea", "integer", "text", "text", "timestamp with time zone"),
        ("NOT NULL", "NOT NULL", "", "NOT NULL", "NOT NULL"),
        strict=True,
    )
)


def expected_columns(table: ItemTable) -> dict[str, str]:
    """Column name -> ``information_schema`` data type, in table order."""
    out = {name: kind for name, kind, _ in _KEY_TYPES}
    out.update((f.name, POSTGRES_TYPES[f.kind]) for f in table.fields)
    return out


async def ensure_table(conn: Conn, target: Target, table: ItemTable) -> None:
    """Create the typed table if missing; refuse one whose columns differ.

    Run inside a transaction; it takes the store's schema advisory lock (as migrations do),
    so workers that start together create the table once.

    Raises:
        ConfigError: Named ``items_table``: the name is one of the store's own tables, or the
            table exists with other columns or types (the message lists each difference and
            says to pick another name or drop the table by hand).
    """
    if table.name in STORE_TABLES:
        raise ConfigError(
            "items_table",
            f"{table.name!r} is one of the store's own tables; choose another name",
        )
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (f"crawlq.store:{target.schema}",),
    )
    cur = await conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
        (target.schema, table.name),
    )
    found = {str(name): str(kind) for name, kind in await cur.fetchall()}
    want = expected_columns(table)
    if not found:
        await conn.execute(_create(table))
        logger.info(
            "store %s: created typed items table %s for %s (%d fields)",
            target.name,
            table.name,
            table.item_type,
            len(table.fields),
        )
        return
    if found != want:
        raise ConfigError(
            "items_table",
            f"table {table.name!r} in {target.name} exists with other columns than "
            f"{table.item_type} needs: {_difference(found, want)}; crawlq never alters it: "
            "choose another --items-table or drop that table yourself",
        )


def _create(table: ItemTable) -> sql.Composed:
    columns: list[sql.Composable] = [
        sql.SQL("{} {} {}").format(sql.Identifier(name), sql.SQL(kind), sql.SQL(null))
        for name, kind, null in _KEY_TYPES
    ]
    columns += [
        sql.SQL("{} {}{}").format(
            sql.Identifier(f.name),
            sql.SQL(POSTGRES_TYPES[f.kind]),
            sql.SQL("" if f.nullable else " NOT NULL"),
        )
        for f in table.fields
    ]
    columns.append(sql.SQL("PRIMARY KEY (crawlq_fingerprint, crawlq_index)"))
    return sql.SQL("CREATE TABLE {} ({})").format(
        sql.Identifier(table.name), sql.SQL(", ").join(columns)
    )


def _difference(found: dict[str, str], want: dict[str, str]) -> str:
    parts = [f"missing {n} ({t})" for n, t in want.items() if n not in found]
    parts += [f"unexpected {n} ({t})" for n, t in found.items() if n not in want]
    parts += [
        f"{n} is {found[n]}, expected {t}" for n, t in want.items() if n in found and found[n] != t
    ]
    return "; ".join(parts) or "the same columns in another order"


def _no_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_no_nul(k): _no_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nul(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class TypedRows:
    """The typed rows of one write, and the fingerprints whose old rows they replace.

    Attributes:
        table: The typed table.
        clear: Fingerprints whose typed rows are deleted first (every page, dead letter and
            filtered record of the write).
        rows: ``(fingerprint, index, job, url, stored_at, *cells)`` per item that fits.
    """

    table: ItemTable
    clear: list[bytes]
    rows: list[tuple[Any, ...]]

    @classmethod
    def of(
        cls,
        table: ItemTable,
        clear: Sequence[bytes],
        items: Sequence[ItemRecord],
        job: str | None,
    ) -> TypedRows:
        """Convert ``items``; one that does not fit is left out with a warning."""
        kinds = [f.kind for f in table.fields]
        rows = []
        for item in items:
            try:
                cells = table.row(item.data)
            except WrongType as exc:
                logger.warning(
                    "typed items table %s: item %d of %s has no typed row (%s); its JSONB "
                    "row is kept",
                    table.name,
                    item.index,
                    item.url,
                    exc,
                )
                continue
            cells = [
                Jsonb(_no_nul(c)) if k == "json" and c is not None else _no_nul(c)
                for k, c in zip(kinds, cells, strict=True)
            ]
            stored = dt.datetime.fromtimestamp(item.created_at, dt.UTC)
            rows.append((item.fingerprint, item.index, job, _no_nul(item.url), stored, *cells))
        return cls(table, sorted(set(clear)), rows)

    async def write(self, cur: psycopg.AsyncCursor[TupleRow]) -> None:
        """Delete the fingerprints' old rows, insert the new ones (inside the caller's tx)."""
        name = sql.Identifier(self.table.name)
        if self.clear:
            delete = sql.SQL("DELETE FROM {} WHERE crawlq_fingerprint = ANY(%s)").format(name)
            await cur.execute(delete, (self.clear,))
        if self.rows:
            await cur.executemany(self._insert(), self.rows)

    def _insert(self) -> sql.Composed:
        names = [n for n, _, _ in _KEY_TYPES] + [f.name for f in self.table.fields]
        return sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            sql.Identifier(self.table.name),
            sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(", ").join([sql.Placeholder()] * len(names)),
        )


async def set_jobs_from_pages(
    cur: psycopg.AsyncCursor[TupleRow], table: ItemTable, fingerprints: list[bytes]
) -> None:
    """Give reparsed typed rows their page's job (a reparse does not know it)."""
    update = sql.SQL(
        "UPDATE {} AS t SET crawlq_job = p.job FROM pages AS p"
        " WHERE t.crawlq_fingerprint = p.fingerprint AND t.crawlq_fingerprint = ANY(%s)"
    ).format(sql.Identifier(table.name))
    await cur.execute(update, (fingerprints,))
