"""The embedded result store: SQLite, sharing its file with the embedded frontier.

One `SqliteStore` owns one connection, used only on one dedicated worker thread: every call hops
there with ``loop.run_in_executor``, so calls are serialised and the event loop never blocks on
the disk. The file is in WAL mode (readers never block the writer) with ``synchronous=NORMAL``:
a committed write survives a crash of the process, not necessarily a power loss. Each write is
one short ``BEGIN IMMEDIATE`` transaction, so it takes the file's single write lock up front
and waits up to ``busy_timeout_s`` for the frontier's connection to release it, instead of
failing on a lock upgrade.

The DDL is ``schema.sql`` beside this module; ``store_meta`` records its version. A store
opened ``read_only`` (export, status) opens the file read-only and creates and migrates
nothing: a file without the store's tables is an error, an older schema is read as it is.
Opening, schema versions and errors: `crawlq.store.sqlite.schema`; the SQL shared with
PostgreSQL: `crawlq.store.sql`.

A new file is created with mode ``0600`` (owner only; a stricter umask wins): it may hold
page bodies (``--store-body``). SQLite gives its ``-wal`` and ``-shm`` files the same mode.

Writes (`SqliteStore.write`, `SqliteStore.replace_parse`): item data is serialised before the
lock is taken, so a bad item fails the call without touching the file; rows are written with
the statements shared with PostgreSQL (`crawlq.store.sql.writes`; SQLite keeps NUL
characters and the spider's key order).
"""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from crawlq.errors import StoreError
from crawlq.records import (
    DeadRecord,
    FilteredRecord,
    ItemRecord,
    PageRecord,
    ParseUpdate,
    ResultBatch,
    last_update_wins,
)
from crawlq.store.contract import StoreCounts
from crawlq.store.sql import SQLITE
from crawlq.store.sql.reads import CountQueries, Queries, Row, SqlReader, store_counts
from crawlq.store.sql.writes import Writes, item_json
from crawlq.store.sqlite.schema import SCHEMA_VERSION, connect, translate

__all__ = ["SqliteStore"]

_T = TypeVar("_T")

_SPIDER_ERROR_KIND = "substr(error, 15, instr(substr(error, 15) || ':', ':') - 1)"
"""A spider-error page's kind text: between the prefix and the next ':'."""


class SqliteStore(SqlReader):
    """`crawlq.store.Store` on a SQLite file (the embedded default).

    Build with `SqliteStore.open`; see `crawlq.store.Store` for the semantics of each method.
    """

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        executor: ThreadPoolExecutor,
        busy_s: float,
        read_only: bool = False,
        version: int = SCHEMA_VERSION,
    ) -> None:
        self._path = path
        self._conn = conn
        self._read_only = read_only
        self._queries = Queries(SQLITE, version)
        self._executor = executor
        self._busy_s = busy_s
        self._closed = False

    @classmethod
    async def open(
        cls, path: str | Path, *, busy_timeout_s: float = 30.0, read_only: bool = False
    ) -> SqliteStore:
        """Open (or create) the store in the SQLite file at ``path``.

        Creates the file and the store's tables when missing, switches the file to WAL mode
        and checks the schema version.

        Args:
            path: The database file; its directory must exist. The frontier may use the same
                file.
            busy_timeout_s: Seconds a statement waits for another connection's write lock
                before `StoreUnavailable` is raised.
            read_only: Open the file read-only and create or migrate nothing (``export``,
                ``status``): the file and its tables must exist, `write` is refused, and a
                schema older than `SCHEMA_VERSION` is read as it is.

        Returns:
            The open store; close it with `close`.

        Raises:
            StoreError: The file cannot be opened (missing directory, not a database) or its
                schema is newer than this code; with ``read_only``, the file is missing or
                holds no store (``no crawlq store in PATH (…)``). The message names the file.
            StoreUnavailable: The file stayed locked for ``busy_timeout_s`` while the schema
                was checked.
        """
        path = Path(path)
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crawlq-store")
        loop = asyncio.get_running_loop()
        try:
            conn, version = await loop.run_in_executor(
                executor, connect, path, busy_timeout_s, read_only
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(path, conn, executor, busy_timeout_s, read_only, version)

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<SqliteStore {str(self._path)!r} {state}>"

    async def write(self, batch: ResultBatch) -> None:
        """Write one flush in one transaction; see `crawlq.store.Store.write`.

        Raises:
            ValueError: An item's data is not a JSON-serialisable object.
            StoreUnavailable: The file stayed locked for ``busy_timeout_s``.
            StoreError: Any other SQLite failure, the store is closed or read-only.
        """
        if self._read_only:
            raise StoreError(f"store {self._path} is open read-only")
        if len(batch) == 0:
            return
        await self._run(functools.partial(_write_batch, batch.resolved()))

    async def counts(self, job: str | None = None) -> StoreCounts:
        """Count records of each kind in one read transaction; see `crawlq.store.Store.counts`.

        Raises:
            StoreUnavailable: The file stayed locked for ``busy_timeout_s``.
            StoreError: Any other SQLite failure, or the store is closed.
        """
        return await self._run(
            functools.partial(_counts, self._queries.counts(_SPIDER_ERROR_KIND, job))
        )

    async def replace_parse(self, updates: Sequence[ParseUpdate]) -> frozenset[bytes]:
        """Replace pages' error and items in one transaction; see `crawlq.store.Store`.

        Raises:
            ValueError: An item's data is not a JSON-serialisable object.
            StoreUnavailable: The file stayed locked for ``busy_timeout_s``.
            StoreError: Any other SQLite failure, the store is closed or read-only.
        """
        if self._read_only:
            raise StoreError(f"store {self._path} is open read-only")
        if not updates:
            return frozenset()
        reparsed = functools.partial(_replace_parse, last_update_wins(updates))
        return await self._run(reparsed)

    async def close(self) -> None:
        """Close the connection after the calls already queued; idempotent."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._conn.close)
        finally:
            self._executor.shutdown(wait=True)

    async def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn(connection)`` on the store thread, translating SQLite errors."""
        if self._closed:
            raise StoreError(f"store {self._path} is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, self._conn)
        except sqlite3.Error as exc:
            raise translate(self._path, self._busy_s, exc) from exc

    # The reads' hooks (`crawlq.store.sql.reads.SqlReader`).

    async def _fetch(self, query: str, params: tuple[Any, ...]) -> list[Row]:
        """One chunk of a keyset stream: one short autocommit query on the store thread."""
        return await self._run(functools.partial(_fetch, query, params))

    async def _snapshot(self, queries: Sequence[str], params: tuple[Any, ...]) -> list[list[Row]]:
        return await self._run(functools.partial(_read_snapshot, queries, params))

    def _fingerprints_in(self, fingerprints: list[bytes]) -> tuple[str, tuple[Any, ...]]:
        return f"WHERE fingerprint IN ({SQLITE.marks(len(fingerprints))})", tuple(fingerprints)

    def _item_data(self, stored: Any) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(stored)  # JSON text, keys in the spider's order
        return data


# Everything below runs on the store thread.


def _counts(queries: CountQueries, conn: sqlite3.Connection) -> StoreCounts:
    conn.execute("BEGIN")  # one snapshot for every count
    try:
        totals = conn.execute(*queries.totals).fetchone()
        groups = [conn.execute(*query).fetchall() for query in queries.groups]
        spider_errors = conn.execute(*queries.spider_errors).fetchall()
    finally:
        conn.execute("COMMIT")
    return store_counts(totals, groups, spider_errors)


def _read_snapshot(
    queries: Sequence[str], params: tuple[Any, ...], conn: sqlite3.Connection
) -> list[list[Row]]:
    """Run each query with ``params`` inside one read transaction (one snapshot)."""
    conn.execute("BEGIN")
    try:
        return [conn.execute(query, params).fetchall() for query in queries]
    finally:
        conn.execute("COMMIT")


def _fetch(sql: str, params: tuple[Any, ...], conn: sqlite3.Connection) -> list[Row]:
    rows: list[Row] = conn.execute(sql, params).fetchall()
    return rows


_SQL = Writes.of(SQLITE)
_REPARSED_PAGE = "UPDATE pages SET error = ?, spider = ? WHERE fingerprint = ? AND fetched_at = ?"


def _write_batch(batch: ResultBatch, conn: sqlite3.Connection) -> None:
    """Write a resolved batch in one IMMEDIATE transaction."""
    item_rows = [_item_row(item) for item in batch.items]  # fail before taking the lock
    job = batch.job
    page_rows = [
        (
            p.fingerprint,
            p.url,
            p.final_url,
            p.status,
            p.content_type,
            p.depth,
            p.title,
            p.fetched_at,
            p.size_bytes,
            p.elapsed_s,
            p.attempt,
            p.error,
            p.spider,
            p.body,
            p.warc_file,
            p.warc_offset,
            p.canonical_url,
            p.referrer,
            p.request,
            job,
        )
        for p in batch.pages
    ]
    dead_rows = [
        (d.fingerprint, d.url, d.reason, d.detail, d.attempts, d.depth, d.at, d.referrer, job)
        for d in batch.dead
    ]
    filtered_rows = [(f.fingerprint, f.url, f.reason, f.depth, f.at, job) for f in batch.filtered]
    conn.execute("BEGIN IMMEDIATE")
    try:
        if page_rows:
            _delete(conn, ("dead_letters", "filtered", "items"), batch.pages)
            conn.executemany(_SQL.upsert_page, page_rows)
        if dead_rows:
            _delete(conn, ("pages", "items", "filtered"), batch.dead)
            conn.executemany(_SQL.upsert_dead, dead_rows)
        if item_rows:  # after both deletes: a page's or a dead letter's (errback) items
            conn.executemany(_SQL.insert_item, item_rows)
        if filtered_rows:
            _delete(conn, ("pages", "items", "dead_letters"), batch.filtered)
            conn.executemany(_SQL.upsert_filtered, filtered_rows)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _replace_parse(updates: Sequence[ParseUpdate], conn: sqlite3.Connection) -> frozenset[bytes]:
    """Apply `ParseUpdate` s in one IMMEDIATE transaction; returns the pages updated."""
    items = {u.fingerprint: [_item_row(item) for item in u.items] for u in updates}  # may raise
    updated: set[bytes] = set()
    conn.execute("BEGIN IMMEDIATE")
    try:
        for u in updates:
            cursor = conn.execute(_REPARSED_PAGE, (u.error, u.spider, u.fingerprint, u.fetched_at))
            if cursor.rowcount == 0:
                continue  # gone, or fetched again since it was read: the newer fetch wins
            updated.add(u.fingerprint)
            conn.execute("DELETE FROM items WHERE fingerprint = ?", (u.fingerprint,))
            conn.executemany(_SQL.insert_item, items[u.fingerprint])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return frozenset(updated)


def _item_row(item: ItemRecord) -> tuple[Any, ...]:
    return (item.fingerprint, item.index, item.url, item.spider, item_json(item), item.created_at)


def _delete(
    conn: sqlite3.Connection,
    tables: tuple[str, ...],
    records: Sequence[PageRecord | DeadRecord | FilteredRecord],
) -> None:
    keys = [(r.fingerprint,) for r in records]
    for table in tables:
        conn.executemany(f"DELETE FROM {table} WHERE fingerprint = ?", keys)
