r"""The shared result store: PostgreSQL through psycopg 3 on asyncio.

Every worker, on any machine, writes to one `PostgresStore`; it is the only module that
imports psycopg.

Where the tables live: in one schema (``crawlq`` unless the URL's ``search_path`` option or
the ``schema`` argument of `PostgresStore.open` names another), created on first use. The
schema's version is in its ``store_meta`` table. `MIGRATIONS` lists the steps from version 0
(an empty schema) up to `SCHEMA_VERSION`; opening a store runs the missing steps in one
transaction, under an advisory lock so that workers starting together migrate once, and
refuses a schema whose version is newer than this code. Opened ``read_only`` (export, status),
a store creates and migrates nothing: no tables is an error; an older schema is read as it is.

Writes: each `PostgresStore.write` is one transaction, sent in one pipeline (one network
round trip for the whole batch). It first upserts every fingerprint of the batch into
``outcomes``, in fingerprint order: that row lock serialises writers of one fingerprint
whatever its kind (page, dead, filtered) and the common order rules out deadlocks between
writers. Then it removes the other kinds' rows and upserts its own (``INSERT … ON CONFLICT
(fingerprint) DO UPDATE`` through ``executemany``).

Connections: up to ``max_connections`` per store, made on demand and kept while idle. An idle
connection that the server closed (a restart) is noticed without a round trip and replaced, so
the first call after an outage reconnects. A call that fails because the server cannot be
reached raises `StoreUnavailable` and changes nothing (its transaction is rolled back); the
caller retries it later.

PostgreSQL differs from SQLite in two ways a user can see:

* Text cannot hold NUL characters: a ``"\x00"`` in any text field or item string is stored
  as U+FFFD.
* Items are JSONB, which keeps keys in its own order (shorter keys first), not the spider's.

Times are Unix seconds as ``double precision``, so they round-trip exactly. Needs PostgreSQL
11 or later, and the right to create the schema when it does not exist yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import select
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from crawlq.errors import ConfigError, StoreError, StoreUnavailable
from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.secrecy import quote_userinfo, redact
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
from crawlq.store.postgres_schema import STEPS

__all__ = ["DEFAULT_SCHEMA", "MIGRATIONS", "SCHEMA_VERSION", "Migration", "PostgresStore"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_Conn = psycopg.AsyncConnection[TupleRow]
_Row = tuple[Any, ...]

DEFAULT_SCHEMA = "crawlq"
"""Schema of the store's tables when neither the URL nor the caller names one."""

_CHUNK_ROWS = 1000
"""Rows per query when streaming."""
_BODY_CHUNK_ROWS = 16
"""Rows per query when pages are streamed with their bodies (up to ``max_body_bytes`` each)."""
_UNAVAILABLE_STATES = ("57P01", "57P02", "57P03", "53300")
"""SQLSTATEs meaning "the server cannot serve us now": admin/crash shutdown, starting up, too
many connections (class 08, connection exceptions, is matched by prefix)."""

Migration = Callable[[_Conn], Awaitable[None]]
"""One schema step: given a connection inside the migrating transaction, with ``search_path``
set to the store's schema, bring the schema from version ``i`` to ``i + 1``."""


def _statements(statements: tuple[str, ...]) -> Migration:
    """A migration step that runs ``statements`` in order."""

    async def step(conn: _Conn) -> None:
        for statement in statements:
            await conn.execute(statement)

    return step


MIGRATIONS: tuple[Migration, ...] = tuple(_statements(step) for step in STEPS)
"""``MIGRATIONS[i]`` brings a schema at version ``i`` to ``i + 1``; version 0 is empty. The
DDL is in `crawlq.store.postgres_schema`."""

SCHEMA_VERSION = len(STEPS)
"""Version of the schema this code reads and writes: ``len(MIGRATIONS)``."""

assert len(MIGRATIONS) == SCHEMA_VERSION

_PAGE_COLUMNS = (
    "fingerprint, url, final_url, status, content_type, depth, title, fetched_at, size_bytes,"
    " elapsed_s, attempt, error, spider"
)
_CLAIM = """
INSERT INTO outcomes (fingerprint, kind) VALUES (%s, %s)
ON CONFLICT (fingerprint) DO UPDATE SET kind = excluded.kind
WHERE outcomes.kind <> excluded.kind
"""  # a conflicting row is locked even when the WHERE leaves it unchanged
_UPSERT_PAGE = f"""
INSERT INTO pages ({_PAGE_COLUMNS}, body, warc_file, warc_offset, canonical_url, referrer,
    request)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, final_url = excluded.final_url, status = excluded.status,
    content_type = excluded.content_type, depth = excluded.depth, title = excluded.title,
    fetched_at = excluded.fetched_at, size_bytes = excluded.size_bytes,
    elapsed_s = excluded.elapsed_s, attempt = excluded.attempt, error = excluded.error,
    spider = excluded.spider, body = excluded.body, warc_file = excluded.warc_file,
    warc_offset = excluded.warc_offset, canonical_url = excluded.canonical_url,
    referrer = excluded.referrer, request = excluded.request
"""
_LOCK_OUTCOMES = """
SELECT fingerprint FROM outcomes WHERE fingerprint = ANY(%s) ORDER BY fingerprint FOR UPDATE
"""  # the writers' per-fingerprint locks, taken in their order
_REPARSED_PAGES = """
UPDATE pages AS p SET error = u.error, spider = u.spider
FROM unnest(%s::bytea[], %s::float8[], %s::text[], %s::text[]) AS u (fp, at, error, spider)
WHERE p.fingerprint = u.fp AND p.fetched_at = u.at
RETURNING p.fingerprint
"""
_SPIDER_ERRORS_BY_TYPE = f"""
SELECT split_part(substr(error, 15), ':', 1), count(*) FROM pages
WHERE {SPIDER_ERROR_SQL} GROUP BY 1
"""
"""Spider-error pages by the text between the prefix and the next ':' (their kind)."""
_INSERT_ITEM = """
INSERT INTO items (fingerprint, idx, url, spider, data, created_at)
VALUES (%s, %s, %s, %s, %s::jsonb, %s)
"""
_UPSERT_DEAD = """
INSERT INTO dead_letters (fingerprint, url, reason, detail, attempts, depth, at, referrer)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, detail = excluded.detail,
    attempts = excluded.attempts, depth = excluded.depth, at = excluded.at,
    referrer = excluded.referrer
"""
_UPSERT_FILTERED = """
INSERT INTO filtered (fingerprint, url, reason, depth, at) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, depth = excluded.depth, at = excluded.at
"""
_HAS_PAGES = "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'pages'"
_DELETE = {
    table: f"DELETE FROM {table} WHERE fingerprint = ANY(%s)"
    for table in ("pages", "items", "dead_letters", "filtered")
}


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a store lives: libpq connection string, printable name, schema."""

    conninfo: str
    display: str
    schema: str

    @property
    def name(self) -> str:
        return f"{self.display} (schema {self.schema})"


class PostgresStore:
    """`crawlq.store.Store` on PostgreSQL, shared by every worker of a crawl.

    Build with `PostgresStore.open`; see `crawlq.store.Store` for the semantics of each
    method and the module docstring for how they are implemented.
    """

    def __init__(self, target: _Target, size: int, timeout_s: float, read_only: bool) -> None:
        self._target = target
        self._read_only = read_only
        self._version = SCHEMA_VERSION
        self._size = size
        self._connect_timeout_s = timeout_s
        self._slots = asyncio.Semaphore(size)
        self._idle: list[_Conn] = []
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        schema: str | None = None,
        max_connections: int = 4,
        connect_timeout_s: float = 10.0,
        read_only: bool = False,
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

        Returns:
            The open store; close it with `close`.

        Raises:
            ConfigError: ``url`` is not a valid libpq URL, or ``max_connections`` is out of
                range; ``name`` is ``"store"``.
            StoreUnavailable: The server cannot be reached or refuses the connection (down,
                unknown host, wrong database or credentials); the message names the URL
                without its password.
            StoreError: The schema is newer than this code (the message names the URL and
                both versions), or it cannot be created or migrated; with ``read_only``, there is
                no store (``no crawlq store in URL (…)``) or it is too old to read unmigrated.
        """
        if not 1 <= max_connections <= 100:
            raise ConfigError("store", f"max_connections must be 1..100, got {max_connections}")
        store = cls(_parse_target(url, schema), max_connections, connect_timeout_s, read_only)
        try:
            await store._run(store._check_schema if read_only else store._ensure_schema)
        except BaseException:
            await store.close()
            raise
        return store

    @property
    def schema(self) -> str:
        """The schema that holds the store's tables."""
        return self._target.schema

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
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
        rows = _BatchRows.of(batch.resolved())
        await self._run(rows.write)

    async def counts(self) -> StoreCounts:
        """Count records in one snapshot; see `crawlq.store.Store.counts`.

        Raises:
            StoreUnavailable: The server cannot be reached.
            StoreError: Any other PostgreSQL failure, or the store is closed.
        """
        return await self._run(_counts)

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
        return await self._run(_Reparsed.of(last_update_wins(updates)).write)

    async def pages(
        self,
        *,
        since: float | None = None,
        with_body: bool = False,
        spider_errors_only: bool = False,
    ) -> AsyncIterator[PageRecord]:
        """Stream pages by ``(fetched_at, fingerprint)``; see `crawlq.store.Store.pages`.

        Raises:
            StoreUnavailable: The server cannot be reached.
            StoreError: Any other PostgreSQL failure, or the store is closed.
        """
        body = "body" if with_body else "NULL::bytea"
        select_ = f"SELECT {_PAGE_COLUMNS}, {body}, {self._page_extras()} FROM pages"
        errors = f" AND {SPIDER_ERROR_SQL}" if spider_errors_only else ""
        if since is not None:
            first = f"{select_} WHERE fetched_at >= %s{errors}"
        else:
            first = f"{select_} WHERE {SPIDER_ERROR_SQL}" if spider_errors_only else select_
        later = f"{select_} WHERE (fetched_at, fingerprint) > (%s, %s){errors}"
        order = " ORDER BY fetched_at, fingerprint LIMIT %s"
        chunk = _BODY_CHUNK_ROWS if with_body else _CHUNK_ROWS
        params = () if since is None else (float(since),)
        async for row in self._stream(
            (first + order, params), later + order, lambda r: (r[7], r[0]), chunk
        ):
            yield page_from_row(row)

    async def items(self, *, since: float | None = None) -> AsyncIterator[ItemRecord]:
        """Stream items by ``(created_at, fingerprint, index)``; see `crawlq.store.Store.items`.

        Raises:
            StoreUnavailable: The server cannot be reached.
            StoreError: Any other PostgreSQL failure, or the store is closed.
        """
        select_ = "SELECT created_at, fingerprint, idx, url, spider, data FROM items"
        first = f"{select_} WHERE created_at >= %s" if since is not None else select_
        later = f"{select_} WHERE (created_at, fingerprint, idx) > (%s, %s, %s)"
        order = " ORDER BY created_at, fingerprint, idx LIMIT %s"
        params = () if since is None else (float(since),)
        async for row in self._stream((first + order, params), later + order, _key3, _CHUNK_ROWS):
            yield item_from_row(row, row[5])

    async def dead(self) -> AsyncIterator[DeadRecord]:
        """Stream dead letters by ``(at, fingerprint)``; see `crawlq.store.Store.dead`.

        Raises:
            StoreUnavailable: The server cannot be reached.
            StoreError: Any other PostgreSQL failure, or the store is closed.
        """
        select_ = f"SELECT {self._dead_columns()} FROM dead_letters"
        order = " ORDER BY at, fingerprint LIMIT %s"
        later = f"{select_} WHERE (at, fingerprint) > (%s, %s){order}"
        async for row in self._stream((select_ + order, ()), later, _key2, _CHUNK_ROWS):
            yield dead_from_row(row)

    async def filtered(self) -> AsyncIterator[FilteredRecord]:
        """Stream filtered URLs by ``(at, fingerprint)``; see `crawlq.store.Store.filtered`.

        Raises:
            StoreUnavailable: The server cannot be reached.
            StoreError: Any other PostgreSQL failure, or the store is closed.
        """
        select_ = "SELECT at, fingerprint, url, reason, depth FROM filtered"
        order = " ORDER BY at, fingerprint LIMIT %s"
        later = f"{select_} WHERE (at, fingerprint) > (%s, %s){order}"
        async for row in self._stream((select_ + order, ()), later, _key2, _CHUNK_ROWS):
            yield filtered_from_row(row)

    async def lookup(self, fingerprints: Sequence[bytes]) -> dict[bytes, StoredOutcome]:
        """What the store holds for each fingerprint, in one snapshot (`Store.lookup`).

        Raises:
            ValueError: More than `LOOKUP_MAX` fingerprints.
            StoreUnavailable: The server cannot be reached.
            StoreError: Any other PostgreSQL failure, or the store is closed.
        """
        fps = list(dict.fromkeys(bytes(fp) for fp in fingerprints))
        if len(fps) > LOOKUP_MAX:
            raise ValueError(f"lookup takes at most {LOOKUP_MAX} fingerprints, got {len(fps)}")
        if not fps:
            return {}
        where = "WHERE fingerprint = ANY(%s)"
        queries = (
            f"SELECT {_PAGE_COLUMNS}, NULL::bytea, {self._page_extras()} FROM pages {where}",
            f"SELECT fingerprint, count(*) FROM items {where} GROUP BY fingerprint",
            f"SELECT {self._dead_columns()} FROM dead_letters {where}",
            f"SELECT at, fingerprint, url, reason, depth FROM filtered {where}",
        )

        async def read(conn: _Conn) -> list[list[_Row]]:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                out = []
                for query in queries:
                    cur = await conn.execute(query, (fps,))
                    out.append(await cur.fetchall())
                return out

        pages, items, dead, filtered = await self._run(read)
        return outcomes_from_rows(pages, items, dead, filtered)

    def _page_extras(self) -> str:
        """The page columns after ``body`` that this schema has (read-only: may be old)."""
        warc = "warc_file, warc_offset" if self._version >= 2 else "NULL::text, NULL::bigint"
        canonical = "canonical_url" if self._version >= 3 else "NULL::text"
        referrer = "referrer" if self._version >= 4 else "NULL::text"
        request = "request" if self._version >= 5 else "NULL::text"
        return f"{warc}, {canonical}, {referrer}, {request}"

    def _dead_columns(self) -> str:
        referrer = "referrer" if self._version >= 4 else "NULL::text"
        return f"at, fingerprint, url, reason, detail, attempts, depth, {referrer}"

    async def close(self) -> None:
        """Wait for the calls that hold a connection, then close every connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        for _ in range(self._size):
            await self._slots.acquire()
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()

    # Connections.

    async def _run(self, op: Callable[[_Conn], Awaitable[_T]]) -> _T:
        """Run ``op(connection)`` on a live connection, translating psycopg errors.

        A connection goes back to the idle list only when ``op`` left it healthy and outside
        a transaction; any other is closed.
        """
        if self._closed:
            raise StoreError(f"store {self._target.name} is closed")
        async with self._slots:
            if self._closed:
                raise StoreError(f"store {self._target.name} is closed")
            conn = await self._idle_connection() or await self._connect()
            try:
                result = await op(conn)
            except psycopg.Error as exc:
                error = self._translate(exc, conn)
                await conn.close()
                raise error from exc
            except BaseException:
                await conn.close()
                raise
            if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                await conn.close()  # pragma: no cover - every op ends its transactions
            else:
                self._idle.append(conn)
            return result

    async def _idle_connection(self) -> _Conn | None:
        """The most recently used idle connection that the server has not closed, or None.

        An idle connection has nothing to read unless the server sent a shutdown notice or
        closed it, so a readable socket marks a connection to throw away; checking costs no
        round trip.
        """
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and not _has_input(conn):
                return conn
            logger.info("store %s: the server closed an idle connection", self._target.name)
            await conn.close()
        return None

    async def _connect(self) -> _Conn:
        params = conninfo_to_dict(self._target.conninfo)
        extra: dict[str, Any] = {}
        if "connect_timeout" not in params:
            extra["connect_timeout"] = max(2, round(self._connect_timeout_s))
        if "application_name" not in params:
            extra["application_name"] = "crawlq"
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._target.conninfo, autocommit=True, **extra
            )
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL store {self._target.display}: {_oneline(exc)}"
            ) from exc
        setup = sql.SQL("SET search_path TO {}").format(sql.Identifier(self._target.schema))
        if self._read_only:
            setup = sql.SQL("{}; SET default_transaction_read_only = on").format(setup)
        try:
            await conn.execute(setup)
        except psycopg.Error as exc:
            error = self._translate(exc, conn)
            await conn.close()
            raise error from exc
        except BaseException:
            await conn.close()
            raise
        return conn

    def _translate(self, exc: psycopg.Error, conn: _Conn) -> StoreError:
        state = exc.sqlstate or ""
        if (
            conn.broken
            or state.startswith("08")
            or state in _UNAVAILABLE_STATES
            or (isinstance(exc, psycopg.OperationalError) and not state)
        ):
            return StoreUnavailable(
                f"PostgreSQL store {self._target.display} unavailable: {_oneline(exc)}"
            )
        return StoreError(f"PostgreSQL store {self._target.name}: {_oneline(exc)}")

    async def _stream(
        self,
        first: tuple[str, tuple[Any, ...]],
        later_sql: str,
        key: Callable[[_Row], Sequence[Any]],
        chunk_rows: int,
    ) -> AsyncIterator[_Row]:
        """Yield rows by keyset pagination: ``first`` query, then ``later_sql`` after a key.

        Each chunk is one short query whose connection is released before its rows are
        yielded, so a slow or abandoned consumer holds nothing on the server.
        """
        query, params = first
        while True:
            rows = await self._run(_Fetch(query, (*params, chunk_rows)))
            for row in rows:
                yield row
            if len(rows) < chunk_rows:
                return
            query, params = later_sql, tuple(key(rows[-1]))

    # Schema.

    async def _check_schema(self, conn: _Conn) -> None:
        """Read-only open: check that the store exists; create and migrate nothing.

        Versions 1.. are read as they are (1 lacks the WARC columns, 1 and 2 ``canonical_url``,
        1 to 3 the referrers: `pages` reads NULL). A future step readers cannot bridge is
        refused here: "a crawl of this crawlq migrates it".
        """
        target = self._target
        cur = await conn.execute(_HAS_PAGES, (target.schema,))
        version = await _schema_version(conn, target) if await cur.fetchone() else -1
        if version <= 0:  # no pages table (-1), or no store_meta (0): no store of crawlq's
            missing = "store_meta" if version == 0 else "pages"
            detail = f"schema {target.schema} has no {missing} table"
            raise StoreError(f"no crawlq store in {target.display} ({detail})")
        _check_not_newer(target, version, len(MIGRATIONS))
        self._version = version

    async def _ensure_schema(self, conn: _Conn) -> None:
        target = self._target
        latest = len(MIGRATIONS)
        async with conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"crawlq.store:{target.schema}",),
            )
            cur = await conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (target.schema,)
            )
            if await cur.fetchone() is None:
                await conn.execute(
                    sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(target.schema))
                )
            version = await _schema_version(conn, target)
            _check_not_newer(target, version, latest)
            for step in range(version, latest):
                logger.info(
                    "store %s: migrating schema from version %d to %d", target.name, step, step + 1
                )
                await MIGRATIONS[step](conn)
            if version != latest:
                await conn.execute(
                    "INSERT INTO store_meta (key, value) VALUES ('schema_version', %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(latest),),
                )


def _check_not_newer(target: _Target, version: int, latest: int) -> None:
    if version > latest:
        raise StoreError(
            f"PostgreSQL store {target.name} has schema version {version}, newer than the"
            f" {latest} this crawlq supports; upgrade crawlq or use another schema"
        )


def _has_input(conn: _Conn) -> bool:
    """Whether an idle connection's socket is readable (or unusable), without blocking."""
    try:
        fd = conn.fileno()
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLPRI)
            return bool(poller.poll(0))
        readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - no poll()
        return bool(readable)  # pragma: no cover
    except (OSError, ValueError, psycopg.Error):
        return True


def _parse_target(url: str, schema: str | None) -> _Target:
    url = quote_userinfo(url)  # an unescaped @ in the password: the last @ ends it
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise ConfigError(
            "store", f"invalid PostgreSQL URL {_redact(url)!r}: {_redact(_oneline(exc))}"
        ) from exc
    if not re.fullmatch(r"[0-9]*(,[0-9]*)*", str(params.get("port", ""))):
        raise ConfigError("store", f"invalid port in PostgreSQL URL {_redact(url)!r}")
    user = params.get("user")
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or 5432
    display = f"postgresql://{f'{user}@' if user else ''}{host}:{port}/{params.get('dbname', '')}"
    if schema is None:
        schema = _search_path_schema(str(params.get("options") or "")) or DEFAULT_SCHEMA
    if not schema:
        raise ConfigError("store", "the store schema name must not be empty")
    return _Target(url, display, schema)


def _search_path_schema(options: str) -> str | None:
    """The first schema of a ``-c search_path=…`` (or ``--search_path=…``) server option."""
    match = re.search(r"(?:-c\s*|--)search_path=([^\s,]+)", options)
    return match.group(1).strip('"') if match else None


def _redact(url: str) -> str:
    return redact(url)


def _oneline(exc: BaseException) -> str:
    return " ".join(str(exc).split())


async def _schema_version(conn: _Conn, target: _Target) -> int:
    cur = await conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'store_meta'",
        (target.schema,),
    )
    if await cur.fetchone() is None:
        return 0
    cur = await conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'")
    row = await cur.fetchone()
    with contextlib.suppress(ValueError, TypeError):
        if row is not None:
            return int(row[0])
    raise StoreError(
        f"PostgreSQL store {target.name} has an unreadable schema version"
        f" {row[0] if row else None!r} in store_meta"
    )


def _key2(row: _Row) -> Sequence[Any]:
    return row[:2]


def _key3(row: _Row) -> Sequence[Any]:
    return row[:3]


@dataclass(frozen=True, slots=True)
class _Fetch:
    query: str
    params: tuple[Any, ...]

    async def __call__(self, conn: _Conn) -> list[_Row]:
        async with conn.cursor(binary=True) as cur:
            await cur.execute(self.query, self.params)
            return await cur.fetchall()


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
    if not isinstance(item.data, dict):
        raise ValueError(f"item {item.index} of {item.url!r}: data must be a dict")
    try:
        text = json.dumps(item.data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"item {item.index} of {item.url!r} is not JSON-serialisable: {exc}"
        ) from exc
    if "\\u0000" in text:  # JSONB refuses NUL; the check may also hit an escaped backslash
        text = json.dumps(_no_nul(item.data), ensure_ascii=False, separators=(",", ":"))
    return text


@dataclass(frozen=True, slots=True)
class _BatchRows:
    """A resolved batch as parameter rows, each kind sorted by fingerprint."""

    claims: list[_Row]
    pages: list[_Row]
    items: list[_Row]
    dead: list[_Row]
    filtered: list[_Row]

    @classmethod
    def of(cls, batch: ResultBatch) -> _BatchRows:
        """Convert and check ``batch``; raises ValueError for unserialisable item data."""
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
            )
            for d in batch.dead
        )
        filtered = sorted(
            (f.fingerprint, _text(f.url), _text(f.reason), f.depth, f.at) for f in batch.filtered
        )
        claims = sorted(
            [(r[0], "page") for r in pages]
            + [(r[0], "dead") for r in dead]
            + [(r[0], "filtered") for r in filtered]
        )
        return cls(claims, pages, items, dead, filtered)

    async def write(self, conn: _Conn) -> None:
        """Write every row in one transaction, sent as one pipeline."""
        async with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
            await cur.executemany(_CLAIM, self.claims)  # first: the per-fingerprint locks
            if self.pages:
                await _delete(cur, ("dead_letters", "filtered", "items"), self.pages)
                await cur.executemany(_UPSERT_PAGE, self.pages)
                await cur.executemany(_INSERT_ITEM, self.items)
            if self.dead:
                await _delete(cur, ("pages", "items", "filtered"), self.dead)
                await cur.executemany(_UPSERT_DEAD, self.dead)
            if self.filtered:
                await _delete(cur, ("pages", "items", "dead_letters"), self.filtered)
                await cur.executemany(_UPSERT_FILTERED, self.filtered)


async def _delete(
    cur: psycopg.AsyncCursor[TupleRow], tables: tuple[str, ...], rows: list[_Row]
) -> None:
    """Delete the fingerprints of ``rows`` (their first column) from ``tables``."""
    fingerprints = [row[0] for row in rows]
    for table in tables:
        await cur.execute(_DELETE[table], (fingerprints,))


async def _counts(conn: _Conn) -> StoreCounts:
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM pages), (SELECT count(*) FROM items),"
            " (SELECT count(*) FROM dead_letters), (SELECT count(*) FROM filtered)"
        )
        totals = await cur.fetchone()
        assert totals is not None
        grouped: list[dict[Any, int]] = []
        for query in (
            "SELECT status, count(*) FROM pages GROUP BY status",
            "SELECT reason, count(*) FROM dead_letters GROUP BY reason",
            "SELECT reason, count(*) FROM filtered GROUP BY reason",
        ):
            cur = await conn.execute(query)
            grouped.append(dict(await cur.fetchall()))
        cur = await conn.execute(_SPIDER_ERRORS_BY_TYPE)
        spider_errors = spider_error_counts(await cur.fetchall())
    return StoreCounts(
        pages=totals[0],
        items=totals[1],
        dead=totals[2],
        filtered=totals[3],
        pages_by_status=grouped[0],
        dead_by_reason=grouped[1],
        filtered_by_reason=grouped[2],
        spider_errors_by_type=spider_errors,
    )


@dataclass(frozen=True, slots=True)
class _Reparsed:
    """`ParseUpdate` s as parameter rows, sorted by fingerprint."""

    pages: list[_Row]
    items: list[_Row]

    @classmethod
    def of(cls, updates: Sequence[ParseUpdate]) -> _Reparsed:
        """Convert and check ``updates``; raises ValueError for unserialisable item data."""
        pages = sorted(
            (u.fingerprint, u.fetched_at, _opt_text(u.error), _text(u.spider)) for u in updates
        )
        items = [
            (i.fingerprint, i.index, _text(i.url), _text(i.spider), _item_json(i), i.created_at)
            for u in updates
            for i in u.items
        ]
        return cls(pages, items)

    async def write(self, conn: _Conn) -> frozenset[bytes]:
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
                    await cur.executemany(_INSERT_ITEM, rows)
        return frozenset(updated)
