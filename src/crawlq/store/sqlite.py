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

A new file is created with mode ``0600`` (owner only; a stricter umask wins): it may hold
page bodies (``--store-body``). SQLite gives its ``-wal`` and ``-shm`` files the same mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from crawlq.errors import StoreError, StoreUnavailable
from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.secrecy import create_private
from crawlq.store.base import (
    LOOKUP_MAX,
    SPIDER_ERROR_SQL,
    ParseUpdate,
    ResultBatch,
    StoreCounts,
    StoredOutcome,
    dead_from_row,
    filtered_from_row,
    item_from_row,
    last_update_wins,
    outcomes_from_rows,
    page_from_row,
    spider_error_counts,
)

__all__ = ["SCHEMA_VERSION", "SqliteStore"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 5
"""Version of ``schema.sql`` this code reads and writes (stored in ``store_meta``)."""

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE pages ADD COLUMN warc_file TEXT",
        "ALTER TABLE pages ADD COLUMN warc_offset INTEGER",
    ),
    2: ("ALTER TABLE pages ADD COLUMN canonical_url TEXT",),
    3: (  # the page that linked to each page and dead letter (crawlq inspect, dead list)
        "ALTER TABLE pages ADD COLUMN referrer TEXT",
        "ALTER TABLE dead_letters ADD COLUMN referrer TEXT",
    ),
    4: (  # spider errors: the request for reparse, and an index of the failed pages
        "ALTER TABLE pages ADD COLUMN request TEXT",
        "CREATE INDEX IF NOT EXISTS pages_spider_errors ON pages (fetched_at, fingerprint)"
        f" WHERE {SPIDER_ERROR_SQL}",
    ),
}
"""``_MIGRATIONS[v]`` brings a file at schema version ``v`` to ``v + 1``."""

_T = TypeVar("_T")
_Row = tuple[Any, ...]

_CHUNK_ROWS = 1000
"""Rows fetched per hop to the store thread when streaming."""
_BODY_CHUNK_ROWS = 16
"""Rows per hop when pages are streamed with their bodies (up to ``max_body_bytes`` each)."""

_PAGE_COLUMNS = (
    "fingerprint, url, final_url, status, content_type, depth, title, fetched_at, size_bytes,"
    " elapsed_s, attempt, error, spider"
)
_UPSERT_PAGE = f"""
INSERT INTO pages ({_PAGE_COLUMNS}, body, warc_file, warc_offset, canonical_url, referrer,
    request)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, final_url = excluded.final_url, status = excluded.status,
    content_type = excluded.content_type, depth = excluded.depth, title = excluded.title,
    fetched_at = excluded.fetched_at, size_bytes = excluded.size_bytes,
    elapsed_s = excluded.elapsed_s, attempt = excluded.attempt, error = excluded.error,
    spider = excluded.spider, body = excluded.body, warc_file = excluded.warc_file,
    warc_offset = excluded.warc_offset, canonical_url = excluded.canonical_url,
    referrer = excluded.referrer, request = excluded.request
"""
_REPARSED_PAGE = "UPDATE pages SET error = ?, spider = ? WHERE fingerprint = ? AND fetched_at = ?"
_SPIDER_ERRORS_BY_TYPE = f"""
SELECT substr(error, 15, instr(substr(error, 15) || ':', ':') - 1), count(*)
FROM pages WHERE {SPIDER_ERROR_SQL} GROUP BY 1
"""
"""Spider-error pages by the text between the prefix and the next ':' (their kind)."""
_INSERT_ITEM = """
INSERT INTO items (fingerprint, idx, url, spider, data, created_at) VALUES (?, ?, ?, ?, ?, ?)
"""
_UPSERT_DEAD = """
INSERT INTO dead_letters (fingerprint, url, reason, detail, attempts, depth, at, referrer)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, detail = excluded.detail,
    attempts = excluded.attempts, depth = excluded.depth, at = excluded.at,
    referrer = excluded.referrer
"""
_UPSERT_FILTERED = """
INSERT INTO filtered (fingerprint, url, reason, depth, at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, depth = excluded.depth, at = excluded.at
"""


class SqliteStore:
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
        self._version = version
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
                executor, _connect, path, busy_timeout_s, read_only
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
        await self._run(functools.partial(_write, batch.resolved()))

    async def counts(self) -> StoreCounts:
        """Count records of each kind in one read transaction; see `crawlq.store.Store.counts`.

        Raises:
            StoreUnavailable: The file stayed locked for ``busy_timeout_s``.
            StoreError: Any other SQLite failure, or the store is closed.
        """
        return await self._run(_counts)

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
        return await self._run(functools.partial(_replace_parse, last_update_wins(updates)))

    async def pages(
        self,
        *,
        since: float | None = None,
        with_body: bool = False,
        spider_errors_only: bool = False,
    ) -> AsyncIterator[PageRecord]:
        """Stream pages by ``(fetched_at, fingerprint)``; see `crawlq.store.Store.pages`.

        Raises:
            StoreUnavailable: The file stayed locked for ``busy_timeout_s``.
            StoreError: Any other SQLite failure, or the store is closed.
        """
        body = "body" if with_body else "NULL"
        select = f"SELECT {_PAGE_COLUMNS}, {body}, {self._page_extras()} FROM pages"
        errors = f" AND {SPIDER_ERROR_SQL}" if spider_errors_only else ""
        order = "ORDER BY fetched_at, fingerprint LIMIT ?"
        first = (f"{select} WHERE fetched_at >= ?{errors} {order}", (_lower(since),))
        later = f"{select} WHERE (fetched_at, fingerprint) > (?, ?){errors} {order}"
        chunk = _BODY_CHUNK_ROWS if with_body else _CHUNK_ROWS
        async for row in self._stream(first, later, lambda r: (r[7], r[0]), chunk):
            yield page_from_row(row)

    async def items(self, *, since: float | None = None) -> AsyncIterator[ItemRecord]:
        """Stream items by ``(created_at, fingerprint, index)``; see `crawlq.store.Store.items`.

        Raises:
            StoreUnavailable: The file stayed locked for ``busy_timeout_s``.
            StoreError: Any other SQLite failure, or the store is closed.
        """
        select = "SELECT created_at, fingerprint, idx, url, spider, data FROM items"
        order = "ORDER BY created_at, fingerprint, idx LIMIT ?"
        first = (f"{select} WHERE created_at >= ? {order}", (_lower(since),))
        later = f"{select} WHERE (created_at, fingerprint, idx) > (?, ?, ?) {order}"
        async for row in self._stream(first, later, lambda r: r[:3], _CHUNK_ROWS):
            yield item_from_row(row, json.loads(row[5]))

    async def dead(self) -> AsyncIterator[DeadRecord]:
        """Stream dead letters by ``(at, fingerprint)``; see `crawlq.store.Store.dead`.

        Raises:
            StoreUnavailable: The file stayed locked for ``busy_timeout_s``.
            StoreError: Any other SQLite failure, or the store is closed.
        """
        select = f"SELECT {self._dead_columns()} FROM dead_letters"
        order = "ORDER BY at, fingerprint LIMIT ?"
        first = (f"{select} {order}", ())
        later = f"{select} WHERE (at, fingerprint) > (?, ?) {order}"
        async for row in self._stream(first, later, lambda r: r[:2], _CHUNK_ROWS):
            yield dead_from_row(row)

    async def filtered(self) -> AsyncIterator[FilteredRecord]:
        """Stream filtered URLs by ``(at, fingerprint)``; see `crawlq.store.Store.filtered`.

        Raises:
            StoreUnavailable: The file stayed locked for ``busy_timeout_s``.
            StoreError: Any other SQLite failure, or the store is closed.
        """
        select = "SELECT at, fingerprint, url, reason, depth FROM filtered"
        order = "ORDER BY at, fingerprint LIMIT ?"
        first = (f"{select} {order}", ())
        later = f"{select} WHERE (at, fingerprint) > (?, ?) {order}"
        async for row in self._stream(first, later, lambda r: r[:2], _CHUNK_ROWS):
            yield filtered_from_row(row)

    async def lookup(self, fingerprints: Sequence[bytes]) -> dict[bytes, StoredOutcome]:
        """What the store holds for each fingerprint; see `crawlq.store.Store.lookup`.

        Raises:
            ValueError: More than `LOOKUP_MAX` fingerprints.
            StoreUnavailable: The file stayed locked for ``busy_timeout_s``.
            StoreError: Any other SQLite failure, or the store is closed.
        """
        fps = list(dict.fromkeys(bytes(fp) for fp in fingerprints))
        if len(fps) > LOOKUP_MAX:
            raise ValueError(f"lookup takes at most {LOOKUP_MAX} fingerprints, got {len(fps)}")
        if not fps:
            return {}
        marks = ",".join("?" * len(fps))
        where = f"WHERE fingerprint IN ({marks})"
        queries = (
            f"SELECT {_PAGE_COLUMNS}, NULL, {self._page_extras()} FROM pages {where}",
            f"SELECT fingerprint, count(*) FROM items {where} GROUP BY fingerprint",
            f"SELECT {self._dead_columns()} FROM dead_letters {where}",
            f"SELECT at, fingerprint, url, reason, depth FROM filtered {where}",
        )
        pages, items, dead, filtered = await self._run(
            functools.partial(_read_snapshot, queries, tuple(fps))
        )
        return outcomes_from_rows(pages, items, dead, filtered)

    def _page_extras(self) -> str:
        """The page columns after ``body`` that this file has (read-only stores may be old)."""
        warc = "warc_file, warc_offset" if self._version >= 2 else "NULL, NULL"
        canonical = "canonical_url" if self._version >= 3 else "NULL"
        referrer = "referrer" if self._version >= 4 else "NULL"
        request = "request" if self._version >= 5 else "NULL"
        return f"{warc}, {canonical}, {referrer}, {request}"

    def _dead_columns(self) -> str:
        referrer = "referrer" if self._version >= 4 else "NULL"
        return f"at, fingerprint, url, reason, detail, attempts, depth, {referrer}"

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
            raise _translate(self._path, self._busy_s, exc) from exc

    async def _stream(
        self,
        first: tuple[str, tuple[Any, ...]],
        later_sql: str,
        key: Callable[[_Row], Sequence[Any]],
        chunk_rows: int,
    ) -> AsyncIterator[_Row]:
        """Yield rows by keyset pagination: ``first`` query, then ``later_sql`` after a key.

        Each chunk is one short autocommit query, so nothing stays open between chunks and a
        consumer that stops early leaves nothing behind.
        """
        sql, params = first
        while True:
            rows = await self._run(functools.partial(_fetch, sql, (*params, chunk_rows)))
            for row in rows:
                yield row
            if len(rows) < chunk_rows:
                return
            sql, params = later_sql, tuple(key(rows[-1]))


def _lower(since: float | None) -> float:
    return float("-inf") if since is None else float(since)


def _translate(path: Path, busy_s: float, exc: sqlite3.Error) -> StoreError:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreUnavailable(f"store {path} stayed locked for more than {busy_s} s: {exc}")
    return StoreError(f"store {path}: {exc}")


# Everything below runs on the store thread.


def _connect(path: Path, busy_s: float, read_only: bool) -> tuple[sqlite3.Connection, int]:
    """Open the file and check (or, unless ``read_only``, create or migrate) the schema.

    Returns the connection and the schema version the store reads.
    """
    try:
        if read_only:  # mode=ro: never creates the file
            uri = f"{path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, timeout=busy_s, isolation_level=None, uri=True)
        else:
            with contextlib.suppress(OSError):  # a missing directory: sqlite3 says so below
                create_private(path)  # 0600 (less by the umask), and so its -wal and -shm
            conn = sqlite3.connect(path, timeout=busy_s, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open store {path}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_s * 1000)}")
        if read_only:
            return conn, _check_schema(conn, path)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            logger.warning("store %s: journal_mode is %s, not wal", path, mode)
        conn.execute("PRAGMA synchronous = NORMAL")
        _ensure_schema(conn, path)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.Error):
            error = _translate(path, busy_s, exc)
            if type(error) is StoreError:
                error = StoreError(f"cannot open store {path}: {exc}")
            raise error from exc
        raise
    return conn, SCHEMA_VERSION


@functools.cache
def _schema_statements() -> tuple[str, ...]:
    """Split ``schema.sql`` into statements (with SQLite's own tokenizer)."""
    text = resources.files("crawlq.store").joinpath("schema.sql").read_text(encoding="utf-8")
    statements: list[str] = []
    pending = ""
    for line in text.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    leftover = [ln for ln in pending.splitlines() if ln.strip() and not ln.strip().startswith("--")]
    if leftover:  # pragma: no cover - a broken schema.sql fails every test
        raise RuntimeError(f"schema.sql ends inside a statement: {leftover[0]!r}")
    return tuple(statements)


def _check_schema(conn: sqlite3.Connection, path: Path) -> int:
    """Read-only open: the schema version of the store in ``path``; changes nothing.

    Versions 1.. are read as they are (1 lacks the WARC columns, 1 and 2 ``canonical_url``,
    1 to 3 the referrers: `SqliteStore.pages` reads NULL). A future step readers cannot
    bridge is refused here: "a crawl of this crawlq migrates it".
    """
    version = _schema_version(conn, path)
    if version is None:
        raise StoreError(f"no crawlq store in {path} (no store_meta table)")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"store {path} has schema version {version}, newer than the {SCHEMA_VERSION} "
            "this crawlq supports; upgrade crawlq or use another file"
        )
    return version


def _ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _schema_version(conn, path)
        if version is None:
            for statement in _schema_statements():
                conn.execute(statement)
            conn.execute(
                "INSERT INTO store_meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif version > SCHEMA_VERSION:
            raise StoreError(
                f"store {path} has schema version {version}, newer than the {SCHEMA_VERSION} "
                "this crawlq supports; upgrade crawlq or use another file"
            )
        elif version < SCHEMA_VERSION:
            for step in range(version, SCHEMA_VERSION):
                logger.info("store %s: migrating schema from version %d", path, step)
                for statement in _MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute(
                "UPDATE store_meta SET value = ? WHERE key = 'schema_version'",
                (str(SCHEMA_VERSION),),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _schema_version(conn: sqlite3.Connection, path: Path) -> int | None:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store_meta'"
    ).fetchone()
    if exists is None:
        return None
    row = conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    try:
        return int(row[0])
    except ValueError:
        raise StoreError(f"store {path} has an unreadable schema version {row[0]!r}") from None


def _item_row(item: ItemRecord) -> _Row:
    if not isinstance(item.data, dict):
        raise ValueError(f"item {item.index} of {item.url!r}: data must be a dict")
    try:
        data = json.dumps(item.data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"item {item.index} of {item.url!r} is not JSON-serialisable: {exc}"
        ) from exc
    return (item.fingerprint, item.index, item.url, item.spider, data, item.created_at)


def _write(batch: ResultBatch, conn: sqlite3.Connection) -> None:
    """Write a resolved batch in one IMMEDIATE transaction."""
    item_rows = [_item_row(item) for item in batch.items]  # fail before taking the lock
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
        )
        for p in batch.pages
    ]
    dead_rows = [
        (d.fingerprint, d.url, d.reason, d.detail, d.attempts, d.depth, d.at, d.referrer)
        for d in batch.dead
    ]
    filtered_rows = [(f.fingerprint, f.url, f.reason, f.depth, f.at) for f in batch.filtered]
    conn.execute("BEGIN IMMEDIATE")
    try:
        if page_rows:
            _delete(conn, ("dead_letters", "filtered", "items"), batch.pages)
            conn.executemany(_UPSERT_PAGE, page_rows)
            conn.executemany(_INSERT_ITEM, item_rows)
        if dead_rows:
            _delete(conn, ("pages", "items", "filtered"), batch.dead)
            conn.executemany(_UPSERT_DEAD, dead_rows)
        if filtered_rows:
            _delete(conn, ("pages", "items", "dead_letters"), batch.filtered)
            conn.executemany(_UPSERT_FILTERED, filtered_rows)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _delete(
    conn: sqlite3.Connection,
    tables: tuple[str, ...],
    records: Sequence[PageRecord | DeadRecord | FilteredRecord],
) -> None:
    keys = [(r.fingerprint,) for r in records]
    for table in tables:
        conn.executemany(f"DELETE FROM {table} WHERE fingerprint = ?", keys)


def _counts(conn: sqlite3.Connection) -> StoreCounts:
    conn.execute("BEGIN")  # one snapshot for every count
    try:
        totals = conn.execute(
            "SELECT (SELECT count(*) FROM pages), (SELECT count(*) FROM items),"
            " (SELECT count(*) FROM dead_letters), (SELECT count(*) FROM filtered)"
        ).fetchone()
        by_status = conn.execute("SELECT status, count(*) FROM pages GROUP BY status").fetchall()
        by_dead = conn.execute(
            "SELECT reason, count(*) FROM dead_letters GROUP BY reason"
        ).fetchall()
        by_filtered = conn.execute(
            "SELECT reason, count(*) FROM filtered GROUP BY reason"
        ).fetchall()
        spider_errors = conn.execute(_SPIDER_ERRORS_BY_TYPE).fetchall()
    finally:
        conn.execute("COMMIT")
    return StoreCounts(
        pages=totals[0],
        items=totals[1],
        dead=totals[2],
        filtered=totals[3],
        pages_by_status=dict(by_status),
        dead_by_reason=dict(by_dead),
        filtered_by_reason=dict(by_filtered),
        spider_errors_by_type=spider_error_counts(spider_errors),
    )


def _read_snapshot(
    queries: Sequence[str], params: tuple[Any, ...], conn: sqlite3.Connection
) -> list[list[_Row]]:
    """Run each query with ``params`` inside one read transaction (one snapshot)."""
    conn.execute("BEGIN")
    try:
        return [conn.execute(query, params).fetchall() for query in queries]
    finally:
        conn.execute("COMMIT")


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
            conn.executemany(_INSERT_ITEM, items[u.fingerprint])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return frozenset(updated)


def _fetch(sql: str, params: tuple[Any, ...], conn: sqlite3.Connection) -> list[_Row]:
    rows: list[_Row] = conn.execute(sql, params).fetchall()
    return rows
