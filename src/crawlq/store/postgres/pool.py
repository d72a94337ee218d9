"""Connections of the PostgreSQL store: where it lives (`Target`) and a small pool (`Pool`).

A store holds up to ``max_connections`` connections, made on demand (autocommit, with
``search_path`` set to the store's schema, read-only sessions for a read-only store) and kept
while idle. An idle connection that the server closed (a restart) is noticed without a round
trip and replaced, so the first call after an outage reconnects.

Errors: a call that fails because the server cannot be reached (connection exceptions, SQLSTATE
class 08; shutdown, starting up, too many connections) raises `StoreUnavailable` and changes
nothing (its transaction is rolled back; the caller retries it later); any other psycopg error
is `StoreError`. Messages name the URL without its password.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import select
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from crawlq.errors import ConfigError, StoreError, StoreUnavailable
from crawlq.secrecy import quote_userinfo, redact

__all__ = ["DEFAULT_SCHEMA", "Conn", "Pool", "Target", "oneline", "parse_target"]

logger = logging.getLogger("crawlq.store.postgres")  # one logger for the whole backend

_T = TypeVar("_T")
Conn = psycopg.AsyncConnection[TupleRow]

DEFAULT_SCHEMA = "crawlq"
"""Schema of the store's tables when neither the URL nor the caller names one."""

_UNAVAILABLE_STATES = ("57P01", "57P02", "57P03", "53300")
"""SQLSTATEs meaning "the server cannot serve us now": admin/crash shutdown, starting up, too
many connections (class 08, connection exceptions, is matched by prefix)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a store lives: libpq connection string, printable name, schema."""

    conninfo: str
    display: str
    schema: str

    @property
    def name(self) -> str:
        """The printable URL and the schema, for messages."""
        return f"{self.display} (schema {self.schema})"


def parse_target(url: str, schema: str | None) -> Target:
    """The `Target` of a libpq URL (or ``key=value`` string) and an optional schema.

    Raises:
        ConfigError: The URL or its port is invalid, or the schema name is empty.
    """
    url = quote_userinfo(url)  # an unescaped @ in the password: the last @ ends it
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise ConfigError(
            "store", f"invalid PostgreSQL URL {redact(url)!r}: {redact(oneline(exc))}"
        ) from exc
    if not re.fullmatch(r"[0-9]*(,[0-9]*)*", str(params.get("port", ""))):
        raise ConfigError("store", f"invalid port in PostgreSQL URL {redact(url)!r}")
    user = params.get("user")
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or 5432
    display = f"postgresql://{f'{user}@' if user else ''}{host}:{port}/{params.get('dbname', '')}"
    if schema is None:
        schema = _search_path_schema(str(params.get("options") or "")) or DEFAULT_SCHEMA
    if not schema:
        raise ConfigError("store", "the store schema name must not be empty")
    return Target(url, display, schema)


def _search_path_schema(options: str) -> str | None:
    """The first schema of a ``-c search_path=…`` (or ``--search_path=…``) server option."""
    match = re.search(r"(?:-c\s*|--)search_path=([^\s,]+)", options)
    return match.group(1).strip('"') if match else None


def oneline(exc: BaseException) -> str:
    """An exception's message on one line (psycopg's span several)."""
    return " ".join(str(exc).split())


class Pool:
    """Up to ``size`` connections to ``target``, lent to one call at a time (`run`).

    Args:
        target: Where the store lives.
        size: Most connections at once; calls beyond it wait for a free one.
        connect_timeout_s: Seconds to wait for a new connection (libpq counts whole seconds,
            at least 2) unless the URL sets ``connect_timeout``.
        read_only: Make every session read-only.
    """

    def __init__(self, target: Target, size: int, connect_timeout_s: float, read_only: bool):
        self.target = target
        self.closed = False
        self._read_only = read_only
        self._size = size
        self._connect_timeout_s = connect_timeout_s
        self._slots = asyncio.Semaphore(size)
        self._idle: list[Conn] = []

    async def run(self, op: Callable[[Conn], Awaitable[_T]]) -> _T:
        """Run ``op(connection)`` on a live connection, translating psycopg errors.

        A connection goes back to the idle list only when ``op`` left it healthy and outside
        a transaction; any other is closed.

        Raises:
            StoreUnavailable: The server cannot be reached.
            StoreError: Any other PostgreSQL failure, or the pool is closed.
        """
        if self.closed:
            raise StoreError(f"store {self.target.name} is closed")
        async with self._slots:
            if self.closed:
                raise StoreError(f"store {self.target.name} is closed")
            conn = await self._idle_connection() or await self._connect()
            async with self._closed_on_error(conn):
                result = await op(conn)
            if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                await conn.close()  # pragma: no cover - every op ends its transactions
            else:
                self._idle.append(conn)
            return result

    async def close(self) -> None:
        """Wait for the calls that hold a connection, then close every connection; idempotent."""
        if self.closed:
            return
        self.closed = True
        for _ in range(self._size):
            await self._slots.acquire()
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()

    async def _idle_connection(self) -> Conn | None:
        """The most recently used idle connection that the server has not closed, or None.

        An idle connection has nothing to read unless the server sent a shutdown notice or
        closed it, so a readable socket marks a connection to throw away; checking costs no
        round trip.
        """
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and not _has_input(conn):
                return conn
            logger.info("store %s: the server closed an idle connection", self.target.name)
            await conn.close()
        return None

    async def _connect(self) -> Conn:
        params = conninfo_to_dict(self.target.conninfo)
        extra: dict[str, Any] = {}
        if "connect_timeout" not in params:
            extra["connect_timeout"] = max(2, round(self._connect_timeout_s))
        if "application_name" not in params:
            extra["application_name"] = "crawlq"
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.target.conninfo, autocommit=True, **extra
            )
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL store {self.target.display}: {oneline(exc)}"
            ) from exc
        setup = sql.SQL("SET search_path TO {}").format(sql.Identifier(self.target.schema))
        if self._read_only:
            setup = sql.SQL("{}; SET default_transaction_read_only = on").format(setup)
        async with self._closed_on_error(conn):
            await conn.execute(setup)
        return conn

    @contextlib.asynccontextmanager
    async def _closed_on_error(self, conn: Conn) -> AsyncIterator[None]:
        """Close ``conn`` when the block fails; a psycopg error becomes a crawlq error."""
        try:
            yield
        except psycopg.Error as exc:
            error = self._translate(exc, conn)
            await conn.close()
            raise error from exc
        except BaseException:
            await conn.close()
            raise

    def _translate(self, exc: psycopg.Error, conn: Conn) -> StoreError:
        state = exc.sqlstate or ""
        if (
            conn.broken
            or state.startswith("08")
            or state in _UNAVAILABLE_STATES
            or (isinstance(exc, psycopg.OperationalError) and not state)
        ):
            return StoreUnavailable(
                f"PostgreSQL store {self.target.display} unavailable: {oneline(exc)}"
            )
        return StoreError(f"PostgreSQL store {self.target.name}: {oneline(exc)}")


def _has_input(conn: Conn) -> bool:
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
