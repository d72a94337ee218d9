"""The open frontier file: its thread, connection, ownership, in-memory counts and shared steps.

`FrontierFile` is what every part of `crawlq.frontier.sqlite.SqliteFrontier` is built on (one
class per contract, `crawlq.frontier.contract`, in the module of the contract's name): it
opens and closes the file (`crawlq.frontier.sqlite.schema`), runs each call on the one thread that
owns the connection (`FrontierFile._run`), wraps a step in one ``BEGIN IMMEDIATE``
transaction (`FrontierFile._tx`), and holds the bookkeeping several parts share: requests per
state (``_counts``, kept in memory by the owner), host counters, and which leases are still
held.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self, TypeVar

from crawlq.clock import Clock, SystemClock
from crawlq.errors import FrontierError, FrontierUnavailable
from crawlq.frontier.queue import QueueBounds
from crawlq.frontier.sqlite import schema
from crawlq.frontier.sqlite.schema import CHUNK, HELD, OVER_BUDGET
from crawlq.request import Lease
from crawlq.rules.politeness import HostPolicy, Politeness
from crawlq.rules.politeness import rules_with_default as _rules

__all__ = ["FrontierFile"]

logger = logging.getLogger("crawlq.frontier.sqlite")  # one logger for the whole backend

_T = TypeVar("_T")


class FrontierFile:
    """The frontier's file and the state every part of the frontier shares.

    Args:
        path: The database file (created if missing).
        politeness: The job's host politeness rules.
        clock: Source of "now" (tests pass a `crawlq.clock.ManualClock`).
        read_only: Look without owning (`crawlq.frontier.sqlite`).
    """

    def __init__(
        self,
        path: str | Path,
        politeness: Politeness,
        clock: Clock | None = None,
        *,
        read_only: bool = False,
        bounds: QueueBounds | None = None,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.politeness = politeness
        self.round_trips = 0
        self.clock: Clock = clock or SystemClock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crawlq-frontier")
        self._conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self._seq = 0
        self._counts: Counter[int] = Counter()
        self._wakeup: asyncio.Event | None = None
        self.bounds = bounds or QueueBounds()
        """The job's queue bounds (`crawlq.frontier.queue.QueueBounds`), given at open."""
        self.recovered = 0
        """Leases of an earlier, interrupted owner put back in the queue at open."""
        self._robots_warned: set[str] = set()
        self._version = schema.SCHEMA_VERSION
        self._over_budget = 0  # new URLs max_pages_per_host kept out (frontier_meta)

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        default_policy: HostPolicy | None = None,
        politeness: Politeness | None = None,
        clock: Clock | None = None,
        read_only: bool = False,
        bounds: QueueBounds | None = None,
    ) -> Self:
        """Open (or create) the frontier in ``path`` and take ownership of it.

        ``politeness`` gives the job's rules; ``default_policy`` alone is a shorthand for
        rules with that default and nothing else; ``bounds`` the job's queue bounds (both
        fixed for the life of the opened frontier). With ``read_only`` the file is only
        looked at (`crawlq.frontier.sqlite`): it must exist, nothing is created, migrated or
        recovered, and no lock is taken.

        Raises:
            FrontierLocked: Another live process owns the file.
            FrontierUnavailable: The file cannot be opened (missing directory, not a database).
            FrontierError: The file was written by a newer crawlq (schema version); with
                ``read_only``, the file holds no crawlq frontier.
        """
        rules = _rules(politeness, default_policy)
        self = cls(path, rules, clock, read_only=read_only, bounds=bounds)
        try:
            await self._run(self._open_read_only_sync if read_only else self._open_sync)
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        """Close the database and give up ownership of the file."""

        def shutdown() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None

        with contextlib.suppress(RuntimeError):  # executor already shut down
            await self._run(shutdown)
        self._executor.shutdown(wait=True)

    def _open_sync(self) -> None:
        self._lock_fd = schema.lock(self.path)
        self._conn = conn = schema.connect(self.path)
        schema.migrate(conn, self.path)
        self.recovered = schema.requeue_held(conn)
        if self.recovered:
            logger.warning(
                "requeued %d leases left by an interrupted run of %s", self.recovered, self.path
            )
        self._counts = schema.count_states(conn)
        last_seq = conn.execute("SELECT coalesce(max(seq), 0) FROM frontier_requests")
        self._seq = int(last_seq.fetchone()[0])
        over = conn.execute("SELECT value FROM frontier_meta WHERE key=?", (OVER_BUDGET,))
        self._over_budget = int((over.fetchone() or (0,))[0])

    def _open_read_only_sync(self) -> None:
        self._conn = conn = schema.connect_read_only(self.path)
        self._version = schema.read_version(conn, self.path)
        self._counts = schema.count_states(conn)

    # -- plumbing -------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        loop = asyncio.get_running_loop()
        self.round_trips += 1
        return await loop.run_in_executor(self._executor, fn, *args)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise FrontierUnavailable(f"frontier {self.path} is closed")
        return self._conn

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _tx(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        if self.read_only:
            raise FrontierError(f"frontier {self.path} is open read-only")
        conn = self._db()
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def _dead_at(self, table: str = "") -> str:
        """The dead-time column, qualified by ``table`` (an alias) when given.

        NULL in a read-only look at a file older than version 5, which has no such column.
        """
        column = f"{table}.dead_at_ms" if table else "dead_at_ms"
        return column if self._version >= 5 else "NULL"

    # -- bookkeeping shared by push, lease, settle and replay -----------------------------

    def _adjust_hosts(
        self, conn: sqlite3.Connection, queued: Counter[str], inflight: Counter[str]
    ) -> None:
        for host in queued.keys() | inflight.keys():
            conn.execute(
                "UPDATE frontier_hosts SET queued=queued+?, inflight=inflight+? WHERE host=?",
                (queued[host], inflight[host], host),
            )

    @staticmethod
    def _host_answered(conn: sqlite3.Connection, hosts: Counter[str]) -> None:
        """Forget the strikes of ``hosts`` and close their breakers."""
        conn.executemany(
            "UPDATE frontier_hosts SET pushbacks=0, failures=0, flags='' WHERE host=? "
            "AND (pushbacks > 0 OR failures > 0 OR flags != '')",
            [(host,) for host in hosts],
        )

    def _held_states(
        self, conn: sqlite3.Connection, leases: Sequence[Lease]
    ) -> dict[bytes, tuple[int, str]]:
        """State and host of each of ``leases`` still held under its lease id, by fingerprint."""
        wanted = {lease.request.fingerprint: lease.lease_id for lease in leases}
        fps = list(wanted)
        held: dict[bytes, tuple[int, str]] = {}
        for start in range(0, len(fps), CHUNK):
            chunk = fps[start : start + CHUNK]
            marks = ",".join("?" * len(chunk))
            for fp, lease_id, state, host in conn.execute(
                f"SELECT fp, lease_id, state, host FROM frontier_requests "
                f"WHERE fp IN ({marks}) AND {HELD}",
                chunk,
            ):
                if wanted[fp] == lease_id:
                    held[fp] = (state, host)
        return held
