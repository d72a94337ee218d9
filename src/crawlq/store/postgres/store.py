r"""The shared result store: PostgreSQL through psycopg 3 on asyncio.

Every worker, on any machine, writes to one `PostgresStore`; psycopg is imported only by this
package (`crawlq.store.postgres` maps its files), and the SQL and streaming shared with SQLite
are in `crawlq.store.sql`.

Where the tables live: in one schema (``crawlq`` unless the URL's ``search_path`` option or
the ``schema`` argument of `PostgresStore.open` names another), created on first use. The
schema's version is in its ``store_meta`` table. `MIGRATIONS` lists the steps from version 0
(an empty schema) up to `SCHEMA_VERSION`; opening a store runs the missing steps in one
transaction, under an advisory lock so that workers starting together migrate once, and
refuses a schema whose version is newer than this code. Opened ``read_only`` (export, status),
a store creates and migrates nothing: no tables is an error; an older schema is read as it is.

Reads stream by keyset pagination, each chunk one short query on a connection released before
its rows are yielded, so a slow or abandoned consumer holds nothing on the server. A call that
fails because the server cannot be reached raises `StoreUnavailable` and changes nothing; the
caller retries it later.

PostgreSQL differs from SQLite in two ways a user can see:

* Text cannot hold NUL characters: a ``"\x00"`` in any text field or item string is stored
  as U+FFFD.
* Items are JSONB, which keeps keys in its own order (shorter keys first), not the spider's.

Times are Unix seconds as ``double precision``, so they round-trip exactly. Needs PostgreSQL
11 or later, and the right to create the schema when it does not exist yet.

Writes: a flush (`BatchRows`) is one transaction, sent in one pipeline (one network round
trip for the whole batch). It first upserts every fingerprint of the batch into ``outcomes``,
in fingerprint order: that row lock serialises writers of one fingerprint whatever its kind
(page, dead, filtered) and the common order rules out deadlocks between writers. Then it
removes the other kinds' rows and upserts its own with the statements shared with SQLite
(`crawlq.store.sql.writes`). A reparse (`Reparsed`) takes the same row locks first, so a
concurrent crawl writing the page waits or wins whole. Rows are built (and item data
serialised, NULs replaced) before anything is sent, so a bad item fails the call with
ValueError and nothing written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from crawlq.errors import ConfigError, StoreError
from crawlq.items.schema import ItemTable
from crawlq.records import ItemRecord, ParseUpdate, ResultBatch, last_update_wins
from crawlq.store.contract import StoreCounts
from crawlq.store.postgres.items_table import TypedRows, ensure_table, set_jobs_from_pages
from crawlq.store.postgres.pool import Conn, Pool, Target, parse_target
from crawlq.store.postgres.schema import SCHEMA_VERSION, check_schema, ensure_schema
from crawlq.store.sql import POSTGRES
from crawlq.store.sql.reads import CountQueries, Queries, Row, SqlReader, store_counts
from crawlq.store.sql.writes import Writes, item_json

__all__ = ["PostgresStore"]

_SPIDER_ERROR_KIND = "split_part(substr(error, 15), ':', 1)"
"""A spider-error page's kind text: between the prefix and the next ':'."""


class PostgresStore(SqlReader):
    """`crawlq.store.Store` on PostgreSQL, shared by every worker of a crawl.

    Build with `PostgresStore.open`; see `crawlq.store.Store` for the semantics of each
    method and the module docstring for how they are implemented.
    """

    def __init__(
        self, pool: Pool, read_only: bool, items_table: ItemTable | None, version: int
    ) -> None:
        self._pool = pool
        self._items_table = items_table
        self._target = pool.target
        self._read_only = read_only
        self._queries = Queries(POSTGRES, version)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        schema: str | None = None,
        max_connections: int = 4,
        connect_timeout_s: float = 10.0,
        read_only: bool = False,
        items_table: ItemTable | None = None,
    ) -> PostgresStore:
        """Connect to the store at ``url``, creating or migrating its tables when needed.

        Args:
            url: ``postgresql://[user[:password]@]host[:port]/dbname[?param=value…]`` (or
                ``postgres://…``), any libpq connection URL or ``key=value`` string. The
                schema may be given as ``?options=-csearch_path%3DNAME``.
            schema: The schema that holds the tables; overrides the URL. Default: the first
                entry of the URL's ``search_path`` option, else ``crawlq``. Created if missing.
            max_connections: Most connections this store holds at once, 1..100; calls
                beyond it wait for a free one.
            connect_timeout_s: Seconds to wait for a new connection (libpq counts whole
                seconds, at least 2) unless the URL sets ``connect_timeout``.
            read_only: Create and migrate nothing (``export``, ``status``): the store must
                exist, sessions are read-only and `write` is refused; an older schema is read
                as it is.
            items_table: Also write every item as a row of this typed table
                (``--items-table``; `crawlq.store.postgres.items_table`), created when missing.

        Returns:
            The open store; close it with `close`.

        Raises:
            ConfigError: ``url`` is not a valid libpq URL, or ``max_connections`` is out of
                range; ``name`` is ``"store"``. Named ``items_table``: the typed table
                exists with other columns (listed), or is one of the store's own tables.
            StoreUnavailable: The server cannot be reached or refuses the connection (down,
                unknown host, wrong database or credentials); the message names the URL
                without its password.
            StoreError: The schema is newer than this code (the message names the URL and
                both versions), or it cannot be created or migrated; with ``read_only``, there is
                no store (``no crawlq store in URL (…)``) or it is too old to read unmigrated.
        """
        if not 1 <= max_connections <= 100:
            raise ConfigError("store", f"max_connections must be 1..100, got {max_connections}")
        pool = Pool(parse_target(url, schema), max_connections, connect_timeout_s, read_only)
        table = None if read_only else items_table
        try:
            if read_only:  # read the schema as it is
                version = await pool.run(lambda conn: check_schema(conn, pool.target))
            else:
                await pool.run(lambda conn: _create_or_migrate(conn, pool.target, table))
                version = SCHEMA_VERSION
        except BaseException:
            await pool.close()
            raise
        return cls(pool, read_only, table, version)

    @property
    def schema(self) -> str:
        """The schema that holds the store's tables."""
        return self._target.schema

    def __repr__(self) -> str:
        state = "closed" if self._pool.closed else "open"
        return f"<PostgresStore {self._target.name} {state}>"

    async def write(self, batch: ResultBatch) -> None:
        """Write one flush in one transaction; see `crawlq.store.Store.write`.

        Raises:
            ValueError: An item's data is not a JSON-serialisable object; nothing was sent.
            StoreUnavailable: The server cannot be reached. Nothing was written, unless the
                connection broke during the commit itself; repeating the write is safe
                either way.
            StoreError: Any other PostgreSQL failure, the store is closed or read-only.
        """
        if self._read_only:
            raise StoreError(f"store {self._target.name} is open read-only")
        if len(batch) == 0:
            return
        await self._pool.run(BatchRows.of(batch.resolved(), self._items_table).write)

    async def counts(self, job: str | None = None) -> StoreCounts:
        """Count records in one snapshot; see `crawlq.store.Store.counts`.

        Raises:
            StoreUnavailable: The server cannot be reached.
            StoreError: Any other PostgreSQL failure, or the store is closed.
        """
        return await self._pool.run(_Counts(self._queries.counts(_SPIDER_ERROR_KIND, job)))

    async def replace_parse(self, updates: Sequence[ParseUpdate]) -> frozenset[bytes]:
        """Replace pages' error and items in one transaction; see `crawlq.store.Store`.

        Takes the ``outcomes`` row locks of the pages first, in fingerprint order, as
        `write` does, so a concurrent crawl writing the same page waits or wins whole.

        Raises:
            ValueError: An item's data is not a JSON-serialisable object; nothing was sent.
            StoreUnavailable: The server cannot be reached.
            StoreError: Any other PostgreSQL failure, the store is closed or read-only.
        """
        if self._read_only:
            raise StoreError(f"store {self._target.name} is open read-only")
        if not updates:
            return frozenset()
        rows = Reparsed.of(last_update_wins(updates), self._items_table)
        return await self._pool.run(rows.write)

    async def close(self) -> None:
        """Wait for the calls that hold a connection, then close every connection; idempotent."""
        await self._pool.close()

    # The reads' hooks (`crawlq.store.sql.reads.SqlReader`).

    async def _fetch(self, query: str, params: tuple[Any, ...]) -> list[Row]:
        """One chunk of a keyset stream: one short query, its connection released after."""
        return await self._pool.run(_Fetch(query, params))

    async def _snapshot(self, queries: Sequence[str], params: tuple[Any, ...]) -> list[list[Row]]:
        async def read(conn: Conn) -> list[list[Row]]:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                out = []
                for query in queries:
                    cur = await conn.execute(query, params)
                    out.append(await cur.fetchall())
                return out

        return await self._pool.run(read)

    def _fingerprints_in(self, fingerprints: list[bytes]) -> tuple[str, tuple[Any, ...]]:
        return "WHERE fingerprint = ANY(%s)", (fingerprints,)

    def _item_data(self, stored: Any) -> dict[str, Any]:
        data: dict[str, Any] = stored  # JSONB, decoded by psycopg
        return data


async def _create_or_migrate(conn: Conn, target: Target, items_table: ItemTable | None) -> None:
    """A writable open: the schema brought to this version, then the typed table if any."""
    await ensure_schema(conn, target)
    if items_table is not None:
        async with conn.transaction():
            await ensure_table(conn, target, items_table)


@dataclass(frozen=True, slots=True)
class _Fetch:
    query: str
    params: tuple[Any, ...]

    async def __call__(self, conn: Conn) -> list[Row]:
        async with conn.cursor(binary=True) as cur:
            await cur.execute(self.query, self.params)
            return await cur.fetchall()


@dataclass(frozen=True, slots=True)
class _Counts:
    queries: CountQueries

    async def __call__(self, conn: Conn) -> StoreCounts:
        async with conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cur = await conn.execute(*self.queries.totals)
            [totals] = await cur.fetchall()  # a SELECT without FROM: one row
            groups = []
            for query in self.queries.groups:
                cur = await conn.execute(*query)
                groups.append(await cur.fetchall())
            cur = await conn.execute(*self.queries.spider_errors)
            spider_errors = await cur.fetchall()
        return store_counts(totals, groups, spider_errors)


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
