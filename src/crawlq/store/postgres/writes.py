r"""The PostgreSQL store's writes: a flush (`BatchRows`) and a reparse (`Reparsed`).

A flush is one transaction, sent in one pipeline (one network round trip for the whole
batch). It first upserts every fingerprint of the batch into ``outcomes``, in fingerprint
order: that row lock serialises writers of one fingerprint whatever its kind (page, dead,
filtered) and the common order rules out deadlocks between writers. Then it removes the other
kinds' rows and upserts its own with the statements shared with SQLite (`crawlq.store.sql.writes`).
A reparse takes the same row locks first, so a concurrent crawl writing the page waits or
wins whole.

Text cannot hold NUL characters in PostgreSQL: a ``"\x00"`` in any text field or item string
is written as U+FFFD. Rows are built (and item data serialised) before anything is sent, so
a bad item fails the call with ValueError and nothing written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from crawlq.items.schema import ItemTable
from crawlq.records import ItemRecord
from crawlq.store.contract import ParseUpdate, ResultBatch
from crawlq.store.postgres.items_table import TypedRows, set_jobs_from_pages
from crawlq.store.postgres.pool import Conn
from crawlq.store.sql import POSTGRES
from crawlq.store.sql.writes import Writes, item_json

__all__ = ["BatchRows", "Reparsed"]

_Row = tuple[Any, ...]
_SQL = Writes.of(POSTGRES)

_CLAIM = """
INSERT INTO outcomes (fingerprint, kind) VALUES (%s, %s)
ON CONFLICT (fingerprint) DO UPDATE SET kind = excluded.kind
WHERE outcomes.kind <> excluded.kind
"""  # a conflicting row is locked even when the WHERE leaves it unchanged
_LOCK_OUTCOMES = """
SELECT fingerprint FROM outcomes WHERE fingerprint = ANY(%s) ORDER BY fingerprint FOR UPDATE
"""  # the writers' per-fingerprint locks, taken in their order
_REPARSED_PAGES = """
UPDATE pages AS p SET error = u.error, spider = u.spider
FROM unnest(%s::bytea[], %s::float8[], %s::text[], %s::text[]) AS u (fp, at, error, spider)
WHERE p.fingerprint = u.fp AND p.fetched_at = u.at
RETURNING p.fingerprint
"""
_DELETE = {
    table: f"DELETE FROM {table} WHERE fingerprint = ANY(%s)"
    for table in ("pages", "items", "dead_letters", "filtered")
}


def _text(value: str) -> str:
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _opt_text(value: str | None) -> str | None:
    return None if value is None else _text(value)


def _no_nul(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(k) if isinstance(k, str) else k: _no_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nul(v) for v in value]
    return value


def _item_json(item: ItemRecord) -> str:
    text = item_json(item)
    if "\\u0000" in text:  # JSONB refuses NUL; the check may also hit an escaped backslash
        text = json.dumps(_no_nul(item.data), ensure_ascii=False, separators=(",", ":"))
    return text


@dataclass(frozen=True, slots=True)
class BatchRows:
    """A resolved batch as parameter rows, each kind sorted by fingerprint."""

    claims: list[_Row]
    pages: list[_Row]
    items: list[_Row]
    dead: list[_Row]
    filtered: list[_Row]
    typed: TypedRows | None = None

    @classmethod
    def of(cls, batch: ResultBatch, table: ItemTable | None = None) -> BatchRows:
        """Convert and check ``batch``; raises ValueError for unserialisable item data.

        With ``table`` (``--items-table``), the items get typed rows too
        (`crawlq.store.postgres.items_table`), replacing those of every fingerprint written.
        """
        job = _opt_text(batch.job)
        items = [
            (i.fingerprint, i.index, _text(i.url), _text(i.spider), _item_json(i), i.created_at)
            for i in batch.items
        ]
        pages = sorted(
            (
                p.fingerprint,
                _text(p.url),
                _text(p.final_url),
                p.status,
                _text(p.content_type),
                p.depth,
                _opt_text(p.title),
                p.fetched_at,
                p.size_bytes,
                p.elapsed_s,
                p.attempt,
                _opt_text(p.error),
                _text(p.spider),
                p.body,
                _opt_text(p.warc_file),
                p.warc_offset,
                _opt_text(p.canonical_url),
                _opt_text(p.referrer),
                _opt_text(p.request),
                job,
            )
            for p in batch.pages
        )
        dead = sorted(
            (
                d.fingerprint,
                _text(d.url),
                _text(d.reason),
                _text(d.detail),
                d.attempts,
                d.depth,
                d.at,
                _opt_text(d.referrer),
                job,
            )
            for d in batch.dead
        )
        filtered = sorted(
            (f.fingerprint, _text(f.url), _text(f.reason), f.depth, f.at, job)
            for f in batch.filtered
        )
        claims = sorted(
            [(r[0], "page") for r in pages]
            + [(r[0], "dead") for r in dead]
            + [(r[0], "filtered") for r in filtered]
        )
        typed = None
        if table is not None:
            typed = TypedRows.of(table, [c[0] for c in claims], batch.items, job)
        return cls(claims, pages, items, dead, filtered, typed)

    async def write(self, conn: Conn) -> None:
        """Write every row in one transaction, sent as one pipeline."""
        async with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
            await cur.executemany(_CLAIM, self.claims)  # first: the per-fingerprint locks
            if self.pages:
                await _delete(cur, ("dead_letters", "filtered", "items"), self.pages)
                await cur.executemany(_SQL.upsert_page, self.pages)
            if self.dead:
                await _delete(cur, ("pages", "items", "filtered"), self.dead)
                await cur.executemany(_SQL.upsert_dead, self.dead)
            if self.items:  # after both deletes: a page's or a dead letter's (errback) items
                await cur.executemany(_SQL.insert_item, self.items)
            if self.filtered:
                await _delete(cur, ("pages", "items", "dead_letters"), self.filtered)
                await cur.executemany(_SQL.upsert_filtered, self.filtered)
            if self.typed is not None:  # after every delete of the JSONB items, like them
                await self.typed.write(cur)


async def _delete(
    cur: psycopg.AsyncCursor[TupleRow], tables: tuple[str, ...], rows: list[_Row]
) -> None:
    """Delete the fingerprints of ``rows`` (their first column) from ``tables``."""
    fingerprints = [row[0] for row in rows]
    for table in tables:
        await cur.execute(_DELETE[table], (fingerprints,))


@dataclass(frozen=True, slots=True)
class Reparsed:
    """`ParseUpdate` s as parameter rows, sorted by fingerprint."""

    pages: list[_Row]
    items: list[_Row]
    typed: TypedRows | None = None

    @classmethod
    def of(cls, updates: Sequence[ParseUpdate], table: ItemTable | None = None) -> Reparsed:
        """Convert and check ``updates``; raises ValueError for unserialisable item data."""
        pages = sorted(
            (u.fingerprint, u.fetched_at, _opt_text(u.error), _text(u.spider)) for u in updates
        )
        items = [
            (i.fingerprint, i.index, _text(i.url), _text(i.spider), _item_json(i), i.created_at)
            for u in updates
            for i in u.items
        ]
        typed = None
        if table is not None:
            records = [i for u in updates for i in u.items]
            typed = TypedRows.of(table, [u.fingerprint for u in updates], records, None)
        return cls(pages, items, typed)

    async def write(self, conn: Conn) -> frozenset[bytes]:
        """Update the pages that still hold the version read; replace their items."""
        columns = [list(column) for column in zip(*self.pages, strict=True)]
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(_LOCK_OUTCOMES, (columns[0],))
            await cur.execute(_REPARSED_PAGES, columns)
            updated = {bytes(row[0]) for row in await cur.fetchall()}
            if updated:
                await cur.execute(_DELETE["items"], (list(updated),))
                rows = [row for row in self.items if row[0] in updated]
                if rows:
                    await cur.executemany(_SQL.insert_item, rows)
                if self.typed is not None:
                    await self._write_typed(cur, self.typed, sorted(updated))
        return frozenset(updated)

    @staticmethod
    async def _write_typed(
        cur: psycopg.AsyncCursor[TupleRow], typed: TypedRows, updated: list[bytes]
    ) -> None:
        """Replace the typed rows of the pages updated (only those: the others moved on)."""
        keep = set(updated)
        rows = [row for row in typed.rows if row[0] in keep]
        await TypedRows(typed.table, updated, rows).write(cur)
        await set_jobs_from_pages(cur, typed.table, updated)
