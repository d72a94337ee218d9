"""The embedded frontier: one SQLite file, owned by one process at a time.

Every call runs as one ``BEGIN IMMEDIATE`` transaction on a single dedicated thread that owns
the connection, so steps are atomic against each other and the event loop never blocks on
disk. The file is opened in WAL mode; the SQLite store may share it through its own
connection.

Ownership: opening takes an exclusive ``flock`` on ``<path>.lock``. A second process gets
`FrontierLocked`; a process killed with SIGKILL drops the lock with its life, and the next
owner puts the dead run's leases straight back in the queue (each keeps its delivery count),
so a resumed crawl neither waits for visibility timeouts nor loses a URL.

Looking without owning: ``open(path, read_only=True)`` (``crawlq inspect``, ``crawlq dead
list``) takes no lock and opens the file read-only, so it can look at the frontier of a crawl
that is running (WAL readers never block the writer); it reads what the owner has committed,
leases included, and every write raises `FrontierError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import logging
import os
import secrets
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from crawlq.clock import Clock, SystemClock
from crawlq.errors import FrontierError, FrontierLocked, FrontierUnavailable
from crawlq.frontier.base import (
    EVERY_DEAD,
    FRONTIER_FULL,
    DeadFilter,
    DeadLetter,
    FrontierStats,
    HostBackoff,
    HostPolicy,
    HostStats,
    Offer,
    QueueBounds,
    StateName,
    UrlState,
    backoff_state,
)
from crawlq.politeness import Politeness, Strike, StrikePlan
from crawlq.politeness import rules_with_default as _rules
from crawlq.request import CrawlRequest, Lease
from crawlq.robots_record import RobotsRecord
from crawlq.secrecy import PRIVATE_MODE, create_private

__all__ = ["SqliteFrontier"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 5
# 2: state 5 (leased, its host slot freed by `lease(fetched=...)`)
# 3: frontier_robots (the job's robots.txt cache, CREATE ... IF NOT EXISTS in schema.sql), and
#    frontier_hosts.pushbacks, failures, flags (crawlq.politeness: host backoff and breaker)
# 4: frontier_hosts.admitted (URLs of the host ever pushed: the max_pages_per_host budget),
#    filled from frontier_requests when an older file is opened
# 5: frontier_requests.dead_at_ms (crawlq dead list --since), index frontier_dead
_HOST_COLUMNS_V3 = {
    "pushbacks": "INTEGER NOT NULL DEFAULT 0",
    "failures": "INTEGER NOT NULL DEFAULT 0",
    "flags": "TEXT NOT NULL DEFAULT ''",
}
_HOST_COLUMNS_V4 = {"admitted": "INTEGER NOT NULL DEFAULT 0"}
_OVER_BUDGET = "over_budget"  # frontier_meta key: new URLs refused by max_pages_per_host
_REQUEST_COLUMNS_V5 = {"dead_at_ms": "INTEGER"}
# A host's effective concurrency and delay: probing ('p') takes one request at a time; a down
# host ('d') is drained at once (its requests are dead-lettered without a request).
_CONC = "CASE flags WHEN 'p' THEN 1 WHEN 'd' THEN 1000000 ELSE coalesce(concurrency, ?) END"
_DELAY = "CASE flags WHEN 'd' THEN 0 ELSE coalesce(delay_ms, ?) END"
_QUEUED, _LEASED, _DELAYED, _DONE, _DEAD, _FETCHED = range(6)
# _FETCHED rows are leased too (counted under _LEASED in ``_counts``): their request is done on
# the wire, so they no longer hold one of their host's concurrency slots.
_HELD = f"state IN ({_LEASED}, {_FETCHED})"
_STATE_NAMES: dict[int, StateName] = {
    _QUEUED: "queued",
    _LEASED: "in_flight",
    _FETCHED: "in_flight",
    _DELAYED: "delayed",
    _DONE: "done",
    _DEAD: "dead",
}
_CHUNK = 500  # host parameters per "IN (...)" statement (SQLite allows 32,766)
_MAX_READY_HOSTS = 512  # hosts considered per lease call, oldest window first
_T = TypeVar("_T")
_INSERT_REQUEST = (
    "INSERT OR IGNORE INTO frontier_requests(fp, seq, host, priority, state, request) "
    "VALUES (?, ?, ?, ?, 0, ?)"
)
_SEEN = "SELECT 1 FROM frontier_requests WHERE fp=?"


class SqliteFrontier:
    """`crawlq.frontier.base.Frontier` on a SQLite file. Create with `SqliteFrontier.open`.

    Args:
        path: The database file (created if missing).
        politeness: The job's host politeness rules.
        clock: Source of "now" (tests pass a `crawlq.clock.ManualClock`).
        read_only: Look without owning (module docstring).
    """

    def __init__(
        self,
        path: str | Path,
        politeness: Politeness,
        clock: Clock | None = None,
        *,
        read_only: bool = False,
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
        self.bounds = QueueBounds()
        """The job's queue bounds (`crawlq.frontier.base.QueueBounds`)."""
        self.recovered = 0
        """Leases of an earlier, interrupted owner put back in the queue at open."""
        self._robots_warned: set[str] = set()
        self._version = SCHEMA_VERSION
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
    ) -> SqliteFrontier:
        """Open (or create) the frontier in ``path`` and take ownership of it.

        ``politeness`` gives the job's rules; ``default_policy`` alone is a shorthand for
        rules with that default and nothing else. With ``read_only`` the file is only looked
        at (module docstring): it must exist, nothing is created, migrated or recovered, and
        no lock is taken.

        Raises:
            FrontierLocked: Another live process owns the file.
            FrontierUnavailable: The file cannot be opened (missing directory, not a database).
            FrontierError: The file was written by a newer crawlq (schema version); with
                ``read_only``, the file holds no crawlq frontier.
        """
        self = cls(path, _rules(politeness, default_policy), clock, read_only=read_only)
        try:
            await self._run(self._open_read_only_sync if read_only else self._open_sync)
        except BaseException:
            await self.close()
            raise
        return self

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

    def _open_sync(self) -> None:
        # The lock belongs to the file, not to the name: a symlink must find the same lock.
        lock_path = f"{os.path.realpath(self.path)}.lock"
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, PRIVATE_MODE)
        except OSError as exc:
            raise FrontierUnavailable(f"cannot open {lock_path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown pid"
            os.close(fd)
            raise FrontierLocked(str(self.path), f"pid {holder}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd
        try:
            with contextlib.suppress(OSError):  # a missing directory: sqlite3 says so below
                create_private(self.path)  # 0600, and so its -wal and -shm files
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            schema = resources.files("crawlq.frontier").joinpath("schema.sql").read_text()
            conn.executescript(schema)
        except sqlite3.Error as exc:
            raise FrontierUnavailable(f"cannot open frontier {self.path}: {exc}") from exc
        self._conn = conn
        row = conn.execute("SELECT value FROM frontier_meta WHERE key='schema_version'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO frontier_meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif int(row[0]) > SCHEMA_VERSION:
            raise FrontierError(
                f"{self.path} has frontier schema version {row[0]}, newer than this crawlq "
                f"understands ({SCHEMA_VERSION}); upgrade crawlq"
            )
        elif int(row[0]) < SCHEMA_VERSION:  # the script above added what version 2 needs
            for table, columns in (
                ("frontier_hosts", _HOST_COLUMNS_V3 | _HOST_COLUMNS_V4),
                ("frontier_requests", _REQUEST_COLUMNS_V5),
            ):
                have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
                for name, ddl in columns.items():
                    if name not in have:
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {ddl}")
            if int(row[0]) < 4:
                conn.execute(
                    "UPDATE frontier_hosts SET admitted=(SELECT count(*) FROM "
                    "frontier_requests r WHERE r.host=frontier_hosts.host)"
                )
            conn.execute(
                "UPDATE frontier_meta SET value=? WHERE key='schema_version'",
                (str(SCHEMA_VERSION),),
            )
        conn.execute("BEGIN IMMEDIATE")
        self.recovered = conn.execute(
            "UPDATE frontier_requests SET state=0, lease_id=NULL, worker_id=NULL, "
            f"deadline_ms=NULL WHERE {_HELD}"
        ).rowcount
        conn.execute(
            "UPDATE frontier_hosts SET inflight=0, queued=(SELECT count(*) FROM "
            "frontier_requests r WHERE r.state=0 AND r.host=frontier_hosts.host)"
        )
        conn.execute("COMMIT")
        if self.recovered:
            logger.warning(
                "requeued %d leases left by an interrupted run of %s", self.recovered, self.path
            )
        self._counts = Counter(
            dict(conn.execute("SELECT state, count(*) FROM frontier_requests GROUP BY state"))
        )
        self._seq = conn.execute("SELECT coalesce(max(seq), 0) FROM frontier_requests").fetchone()[
            0
        ]
        over = conn.execute("SELECT value FROM frontier_meta WHERE key=?", (_OVER_BUDGET,))
        self._over_budget = int((over.fetchone() or (0,))[0])

    def _open_read_only_sync(self) -> None:
        if not self.path.is_file():
            raise FrontierError(f"no crawlq frontier in {self.path}: no such file")
        try:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, isolation_level=None, timeout=30.0, uri=True)
            conn.execute("PRAGMA busy_timeout=30000")
            tables = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.Error as exc:
            raise FrontierUnavailable(f"cannot open frontier {self.path}: {exc}") from exc
        self._conn = conn
        if not {"frontier_requests", "frontier_meta", "frontier_hosts"} <= tables:
            raise FrontierError(f"no crawlq frontier in {self.path} (no frontier tables)")
        row = conn.execute("SELECT value FROM frontier_meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row is not None else 1
        if version > SCHEMA_VERSION:
            raise FrontierError(
                f"{self.path} has frontier schema version {version}, newer than this crawlq "
                f"understands ({SCHEMA_VERSION}); upgrade crawlq"
            )
        have = {r[1] for r in conn.execute("PRAGMA table_info(frontier_requests)")}
        self._version = SCHEMA_VERSION if "dead_at_ms" in have else 4
        self._counts = Counter(
            dict(conn.execute("SELECT state, count(*) FROM frontier_requests GROUP BY state"))
        )
        self._counts[_LEASED] += self._counts.pop(_FETCHED, 0)

    def _dead_at(self, table: str = "") -> str:
        """The dead-time column, qualified by ``table`` (an alias) when given.

        NULL in a read-only look at a file older than version 5, which has no such column.
        """
        column = f"{table}.dead_at_ms" if table else "dead_at_ms"
        return column if self._version >= 5 else "NULL"

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

    def _adjust_hosts(
        self, conn: sqlite3.Connection, queued: Counter[str], inflight: Counter[str]
    ) -> None:
        for host in queued.keys() | inflight.keys():
            conn.execute(
                "UPDATE frontier_hosts SET queued=queued+?, inflight=inflight+? WHERE host=?",
                (queued[host], inflight[host], host),
            )

    # -- push -----------------------------------------------------------------------------

    async def push(self, requests: Sequence[CrawlRequest]) -> int:
        """See `crawlq.frontier.base.Frontier.push`."""
        return (await self._offer(requests, producer=False)).queued

    async def offer(self, requests: Sequence[CrawlRequest]) -> Offer:
        """See `crawlq.frontier.base.Frontier.offer`."""
        return await self._offer(requests, producer=True)

    async def _offer(self, requests: Sequence[CrawlRequest], *, producer: bool) -> Offer:
        if not requests:
            return Offer(0)
        if self.bounds.bounded:
            offer = await self._run(self._push_bounded_sync, requests, producer)
        else:
            offer = Offer(await self._run(self._push_sync, requests))
        if offer.queued:
            self._wake()
        return offer

    def _push_sync(self, requests: Sequence[CrawlRequest]) -> int:
        by_host: dict[str, list[tuple[bytes, int, str, int, str]]] = defaultdict(list)
        batch_seen: set[bytes] = set()
        for req in requests:
            if req.fingerprint in batch_seen:
                continue
            batch_seen.add(req.fingerprint)
            self._seq += 1
            by_host[req.host].append(
                (req.fingerprint, self._seq, req.host, req.priority, req.to_json())
            )

        budget = self.politeness.max_pages_per_host

        def step(conn: sqlite3.Connection) -> tuple[int, int]:
            total = over = 0
            for host, rows in by_host.items():
                before = conn.total_changes
                if budget is None:
                    conn.executemany(_INSERT_REQUEST, rows)
                else:
                    over += self._insert_within(conn, host, rows, budget)
                added = conn.total_changes - before
                if added:
                    override = self.politeness.configured(host)
                    delay_ms = None if override is None else round(override.delay_s * 1000)
                    conc = None if override is None else override.concurrency
                    conn.execute(
                        "INSERT INTO frontier_hosts(host, queued, admitted, delay_ms, "
                        "concurrency) VALUES (?, ?, ?, ?, ?) ON CONFLICT(host) DO UPDATE SET "
                        "queued=queued+excluded.queued, admitted=admitted+excluded.admitted, "
                        "delay_ms=coalesce(delay_ms, excluded.delay_ms), "
                        "concurrency=coalesce(concurrency, excluded.concurrency)",
                        (host, added, added, delay_ms, conc),
                    )
                    total += added
            if over:
                conn.execute(
                    "INSERT INTO frontier_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO "
                    "UPDATE SET value=CAST(value AS INTEGER) + CAST(excluded.value AS INTEGER)",
                    (_OVER_BUDGET, str(over)),
                )
            return total, over

        total, over = self._tx(step)
        self._counts[_QUEUED] += total
        self._over_budget += over
        return total

    def _push_bounded_sync(self, requests: Sequence[CrawlRequest], producer: bool) -> Offer:
        """`push`/`offer` under `bounds` (`crawlq.frontier.base.QueueBounds`), row by row.

        The page budget (``max_pages_per_host``) is checked first, as in `_push_sync`.
        """
        b = self.bounds
        drop = b.when_full == "drop-lowest"
        now_ms = self.clock.wall_ms()
        budget = self.politeness.max_pages_per_host
        rows = []
        batch_seen: set[bytes] = set()
        for req in requests:
            if req.fingerprint not in batch_seen:
                batch_seen.add(req.fingerprint)
                self._seq += 1
                rows.append((req.fingerprint, self._seq, req.host, req.priority, req.to_json()))

        def step(conn: sqlite3.Connection) -> tuple[Offer, int, int]:
            job_queued = self._counts[_QUEUED]
            evicted = over = 0
            host_queued: dict[str, int] = {}
            host_admitted: dict[str, int] = {}
            delta: Counter[str] = Counter()
            admitted: Counter[str] = Counter()
            added = refused = dropped = 0
            for fp, seq, host, priority, text in rows:
                if conn.execute(_SEEN, (fp,)).fetchone():
                    continue
                if host not in host_queued:
                    got = conn.execute(
                        "SELECT queued, admitted FROM frontier_hosts WHERE host=?", (host,)
                    ).fetchone()
                    host_queued[host] = int(got[0]) if got else 0
                    host_admitted[host] = int(got[1]) if got else 0
                if budget is not None and host_admitted[host] >= budget:
                    over += 1
                    continue
                full = (b.max_queued is not None and job_queued >= b.max_queued) or (
                    b.max_queued_per_host is not None and host_queued[host] >= b.max_queued_per_host
                )
                state = _QUEUED
                if full and not drop:
                    if producer:
                        refused += 1
                        continue
                elif full:
                    dropped += 1
                    lowest = conn.execute(
                        "SELECT fp, priority FROM frontier_requests WHERE host=? AND state=? "
                        "ORDER BY priority ASC, seq DESC LIMIT 1",
                        (host, _QUEUED),
                    ).fetchone()
                    if lowest is not None and lowest[1] < priority:
                        conn.execute(
                            "UPDATE frontier_requests SET state=?, reason=?, dead_at_ms=? "
                            "WHERE fp=?",
                            (_DEAD, FRONTIER_FULL, now_ms, lowest[0]),
                        )
                        host_queued[host] -= 1
                        delta[host] -= 1
                        job_queued -= 1
                        evicted += 1
                    else:
                        state = _DEAD
                dead = state != _QUEUED
                conn.execute(
                    "INSERT INTO frontier_requests(fp, seq, host, priority, state, reason, "
                    "request, dead_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (fp, seq, host, priority, state, FRONTIER_FULL if dead else None, text,
                     now_ms if dead else None),
                )  # fmt: skip
                host_admitted[host] += 1
                admitted[host] += 1
                if state == _QUEUED:
                    added += 1
                    host_queued[host] += 1
                    delta[host] += 1
                    job_queued += 1
            for host in admitted.keys() | delta.keys():
                override = self.politeness.configured(host)
                conn.execute(
                    "INSERT INTO frontier_hosts(host, queued, admitted, delay_ms, concurrency) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT(host) DO UPDATE SET "
                    "queued=queued+excluded.queued, admitted=admitted+excluded.admitted, "
                    "delay_ms=coalesce(delay_ms, excluded.delay_ms), "
                    "concurrency=coalesce(concurrency, excluded.concurrency)",
                    (
                        host,
                        delta[host],
                        admitted[host],
                        None if override is None else round(override.delay_s * 1000),
                        None if override is None else override.concurrency,
                    ),
                )
            if over:
                conn.execute(
                    "INSERT INTO frontier_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO "
                    "UPDATE SET value=CAST(value AS INTEGER) + CAST(excluded.value AS INTEGER)",
                    (_OVER_BUDGET, str(over)),
                )
            return Offer(added, refused, dropped), evicted, over

        offer, evicted, over = self._tx(step)
        self._counts[_QUEUED] += offer.queued - evicted
        self._counts[_DEAD] += offer.dropped
        self._over_budget += over
        if offer.dropped:
            logger.warning(
                "frontier full: %d request(s) dead-lettered as frontier_full", offer.dropped
            )
        return offer

    @staticmethod
    def _insert_within(
        conn: sqlite3.Connection,
        host: str,
        rows: list[tuple[bytes, int, str, int, str]],
        budget: int,
    ) -> int:
        """Insert the new ``rows`` of ``host`` while it has room in its budget.

        Returns:
            How many new ones were left out (their fingerprints stay unseen: found again, they
            are counted again).
        """
        got = conn.execute("SELECT admitted FROM frontier_hosts WHERE host=?", (host,)).fetchone()
        room = budget - (got[0] if got else 0)
        over = 0
        for row in rows:
            if room > 0:
                room -= conn.execute(_INSERT_REQUEST, row).rowcount
            elif conn.execute(_SEEN, row[:1]).fetchone() is None:
                over += 1
        return over

    # -- lease ----------------------------------------------------------------------------

    async def lease(
        self,
        n: int,
        worker_id: str,
        visibility_timeout_s: float,
        wait_s: float = 0.0,
        *,
        until_drained: bool = False,
        fetched: Sequence[Lease] = (),
    ) -> list[Lease]:
        """See `crawlq.frontier.base.Frontier.lease`."""
        if not 1 <= n <= 1000:
            raise ValueError(f"n must be in 1..1000, got {n}")
        if visibility_timeout_s <= 0:
            raise ValueError(f"visibility_timeout_s must be positive, got {visibility_timeout_s}")
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        vt_ms = round(visibility_timeout_s * 1000)
        give_up = time.monotonic() + wait_s
        waited = False
        while True:
            self._wakeup.clear()
            leases, wake_ms = await self._run(self._lease_sync, n, worker_id, vt_ms, fetched)
            fetched = ()
            remaining = give_up - time.monotonic()
            if leases or remaining <= 0 or ((waited or until_drained) and wake_ms is None):
                return leases  # wake_ms None after a wait: drained, nothing will become ready
            timeout = remaining
            if wake_ms is not None:
                timeout = min(remaining, max(0.001, (wake_ms - self.clock.wall_ms()) / 1000))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            waited = True

    def _lease_sync(
        self, n: int, worker_id: str, vt_ms: int, fetched: Sequence[Lease]
    ) -> tuple[list[Lease], int | None]:
        now = self.clock.wall_ms()
        default_delay_ms = round(self.politeness.default.delay_s * 1000)
        default_conc = self.politeness.default.concurrency

        def step(conn: sqlite3.Connection) -> tuple[list[Lease], int | None]:
            if fetched:
                self._free_slots(conn, fetched)
            self._promote_and_reap(conn, now)
            hosts = conn.execute(
                f"SELECT host, inflight, {_DELAY}, {_CONC}, flags "
                "FROM frontier_hosts WHERE queued > 0 AND next_at_ms <= ? "
                f"AND inflight < {_CONC} ORDER BY next_at_ms LIMIT ?",
                (default_delay_ms, default_conc, now, default_conc, _MAX_READY_HOSTS),
            ).fetchall()
            candidates: list[tuple[int, int, bytes, str, str, int]] = []
            delays: dict[str, int] = {}
            down: set[str] = set()
            for host, inflight, delay_ms, conc, flags in hosts:
                take = min(n, conc - inflight if delay_ms == 0 else 1)
                delays[host] = delay_ms
                if flags == "d":
                    down.add(host)
                for fp, priority, seq, request, attempt in conn.execute(
                    "SELECT fp, priority, seq, request, attempt FROM frontier_requests "
                    "WHERE state=0 AND host=? ORDER BY priority DESC, seq LIMIT ?",
                    (host, take),
                ):
                    candidates.append((-priority, seq, fp, host, request, attempt))
            if not candidates:
                return [], self._next_wake_ms(conn, default_conc)
            candidates.sort()
            deadline = now + vt_ms
            leases: list[Lease] = []
            per_host: Counter[str] = Counter()
            updates: list[tuple[str, str, int, bytes]] = []
            for _, _, fp, host, request, attempt in candidates[:n]:
                lease_id = secrets.token_hex(8)
                updates.append((lease_id, worker_id, deadline, fp))
                per_host[host] += 1
                leases.append(
                    Lease(
                        lease_id=lease_id,
                        request=CrawlRequest.from_json(request),
                        attempt=attempt + 1,
                        worker_id=worker_id,
                        deadline_ms=deadline,
                        host_down=host in down,
                    )
                )
            conn.executemany(
                "UPDATE frontier_requests SET state=1, attempt=attempt+1, lease_id=?, "
                "worker_id=?, deadline_ms=? WHERE fp=?",
                updates,
            )
            for host, count in per_host.items():
                conn.execute(
                    "UPDATE frontier_hosts SET queued=queued-?, inflight=inflight+?, "
                    "next_at_ms=? WHERE host=?",
                    (count, count, now + delays[host], host),
                )
            return leases, None

        leases, wake = self._tx(step)
        self._counts[_QUEUED] -= len(leases)
        self._counts[_LEASED] += len(leases)
        return leases, wake

    def _promote_and_reap(self, conn: sqlite3.Connection, now: int) -> None:
        """Move due retries to the queue, and expired leases back to it (their workers died)."""
        due = Counter(
            host
            for (host,) in conn.execute(
                "UPDATE frontier_requests SET state=0 WHERE state=2 AND ready_at_ms <= ? "
                "RETURNING host",
                (now,),
            )
        )
        expired: Counter[str] = Counter()
        slots: Counter[str] = Counter()  # expired leases that still held a host slot
        for state in (_LEASED, _FETCHED):
            # The state is written into the SQL, not bound: only then can SQLite use the
            # partial index on it (frontier_leased, frontier_fetched) instead of a table scan.
            for (host,) in conn.execute(
                "UPDATE frontier_requests SET state=0, lease_id=NULL, worker_id=NULL, "
                f"deadline_ms=NULL WHERE state={state} AND deadline_ms <= ? RETURNING host",
                (now,),
            ):
                expired[host] += 1
                if state == _LEASED:
                    slots[host] += 1
        if not due and not expired:
            return
        if expired:
            logger.warning("%d leases expired and were requeued", expired.total())
        self._adjust_hosts(conn, due + expired, Counter({h: -c for h, c in slots.items()}))
        self._counts[_DELAYED] -= due.total()
        self._counts[_LEASED] -= expired.total()
        self._counts[_QUEUED] += due.total() + expired.total()

    def _held_states(
        self, conn: sqlite3.Connection, leases: Sequence[Lease]
    ) -> dict[bytes, tuple[int, str]]:
        """State and host of each of ``leases`` still held under its lease id, by fingerprint."""
        wanted = {lease.request.fingerprint: lease.lease_id for lease in leases}
        fps = list(wanted)
        held: dict[bytes, tuple[int, str]] = {}
        for start in range(0, len(fps), _CHUNK):
            chunk = fps[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for fp, lease_id, state, host in conn.execute(
                f"SELECT fp, lease_id, state, host FROM frontier_requests "
                f"WHERE fp IN ({marks}) AND {_HELD}",
                chunk,
            ):
                if wanted[fp] == lease_id:
                    held[fp] = (state, host)
        return held

    def _free_slots(self, conn: sqlite3.Connection, leases: Sequence[Lease]) -> None:
        """Give back the host slots of held leases whose requests are done (`lease(fetched=)`)."""
        held = self._held_states(conn, leases)
        freed = [fp for fp, (state, _) in held.items() if state == _LEASED]
        if not freed:
            return
        conn.executemany(
            f"UPDATE frontier_requests SET state={_FETCHED} WHERE fp=?", [(fp,) for fp in freed]
        )
        per_host = Counter(held[fp][1] for fp in freed)
        self._adjust_hosts(conn, Counter(), Counter({h: -c for h, c in per_host.items()}))

    def _next_wake_ms(self, conn: sqlite3.Connection, default_conc: int) -> int | None:
        (host_ms,) = conn.execute(
            f"SELECT min(next_at_ms) FROM frontier_hosts WHERE queued > 0 AND inflight < {_CONC}",
            (default_conc,),
        ).fetchone()
        (retry_ms,) = conn.execute(
            "SELECT min(ready_at_ms) FROM frontier_requests WHERE state=2"
        ).fetchone()
        expiries = [
            conn.execute(
                f"SELECT min(deadline_ms) FROM frontier_requests WHERE state={state}"
            ).fetchone()[0]
            for state in (_LEASED, _FETCHED)
        ]
        times = [t for t in (host_ms, retry_ms, *expiries) if t is not None]
        return min(times) if times else None

    # -- settling leases ------------------------------------------------------------------

    async def renew(
        self, leases: Sequence[Lease], visibility_timeout_s: float, worker_id: str | None = None
    ) -> list[Lease]:
        """See `crawlq.frontier.base.Frontier.renew` (one process owns the file: no heartbeat)."""
        if not leases:
            return []
        return await self._run(self._renew_sync, leases, round(visibility_timeout_s * 1000))

    def _renew_sync(self, leases: Sequence[Lease], vt_ms: int) -> list[Lease]:
        deadline = self.clock.wall_ms() + vt_ms

        def step(conn: sqlite3.Connection) -> list[Lease]:
            renewed = []
            for lease in leases:
                cur = conn.execute(
                    "UPDATE frontier_requests SET deadline_ms=? WHERE fp=? AND lease_id=? "
                    f"AND {_HELD}",
                    (deadline, lease.request.fingerprint, lease.lease_id),
                )
                if cur.rowcount:
                    renewed.append(
                        Lease(
                            lease.lease_id, lease.request, lease.attempt, lease.worker_id, deadline
                        )
                    )
            return renewed

        return self._tx(step)

    async def ack(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.base.Frontier.ack`."""
        return await self._settle(leases, _DONE, None, None)

    async def retry(self, lease: Lease, delay_s: float, reason: str) -> bool:
        """See `crawlq.frontier.base.Frontier.retry`."""
        if delay_s < 0:
            raise ValueError(f"delay_s must not be negative, got {delay_s}")
        due = self.clock.wall_ms() + round(delay_s * 1000)
        return await self._settle([lease], _DELAYED, reason, due) == 1

    async def dead(self, lease: Lease, reason: str) -> bool:
        """See `crawlq.frontier.base.Frontier.dead`."""
        return await self._settle([lease], _DEAD, reason, None) == 1

    async def release(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.base.Frontier.release`."""
        return await self._settle(leases, _QUEUED, None, None)

    async def _settle(
        self, leases: Sequence[Lease], state: int, reason: str | None, due_ms: int | None
    ) -> int:
        if not leases:
            return 0
        count = await self._run(self._settle_sync, leases, state, reason, due_ms)
        if count:
            self._wake()
        return count

    def _settle_sync(
        self, leases: Sequence[Lease], state: int, reason: str | None, due_ms: int | None
    ) -> int:
        attempt_delta = -1 if state == _QUEUED else 0
        dead_at = self.clock.wall_ms() if state == _DEAD else None

        def step(conn: sqlite3.Connection) -> int:
            held = self._held_states(conn, leases)
            if not held:
                return 0
            conn.executemany(
                "UPDATE frontier_requests SET state=?, attempt=attempt+?, "
                "reason=coalesce(?, reason), ready_at_ms=coalesce(?, ready_at_ms), "
                "lease_id=NULL, worker_id=NULL, deadline_ms=NULL, dead_at_ms=? WHERE fp=?",
                [(state, attempt_delta, reason, due_ms, dead_at, fp) for fp in held],
            )
            settled = Counter(host for _, host in held.values())
            slots = Counter(host for was, host in held.values() if was == _LEASED)
            queued = settled if state == _QUEUED else Counter()
            self._adjust_hosts(conn, queued, Counter({h: -c for h, c in slots.items()}))
            if state == _DONE:  # the hosts answered: forget their strikes, close breakers
                self._host_answered(conn, settled)
            return settled.total()

        count = self._tx(step)
        self._counts[_LEASED] -= count
        self._counts[state] += count
        return count

    # -- looking at one URL, and at the dead letters ---------------------------------------

    async def inspect(self, fingerprint: bytes) -> UrlState:
        """See `crawlq.frontier.base.Frontier.inspect`."""

        def read() -> Any:
            return (
                self._db()
                .execute(
                    "SELECT r.state, r.request, r.attempt, r.ready_at_ms, r.worker_id, "
                    f"r.deadline_ms, r.reason, {self._dead_at('r')}, h.next_at_ms "
                    "FROM frontier_requests r LEFT JOIN frontier_hosts h ON h.host = r.host "
                    "WHERE r.fp = ?",
                    (bytes(fingerprint),),
                )
                .fetchone()
            )

        row = await self._run(read)
        if row is None:
            return UrlState(bytes(fingerprint), "unseen")
        state, request, attempt, ready_at, worker, deadline, reason, dead_at, next_at = row
        name = _STATE_NAMES.get(state)
        if name is None:
            raise FrontierError(f"frontier {self.path}: unknown state {state!r}")
        return UrlState(
            fingerprint=bytes(fingerprint),
            state=name,
            request=None if name == "done" else CrawlRequest.from_json(request),
            attempts=attempt,
            ready_at_ms={"queued": next_at or 0, "delayed": ready_at}.get(name),
            worker_id=worker if name == "in_flight" else None,
            deadline_ms=deadline if name == "in_flight" else None,
            reason=None if name == "done" else reason,
            dead_at_ms=dead_at if name == "dead" else None,
        )

    async def dead_letters(self, where: DeadFilter = EVERY_DEAD) -> AsyncIterator[DeadLetter]:
        """See `crawlq.frontier.base.Frontier.dead_letters`. Read by fingerprint, in chunks."""
        after = b""
        while True:
            rows = await self._run(self._dead_chunk, after, where)
            for fp, host, request, attempt, reason, dead_at in rows:
                if where.matches(host, reason or "", dead_at):
                    letter = self._dead_letter(fp, request, reason, attempt, dead_at)
                    if letter is not None:
                        yield letter
            if len(rows) < _CHUNK:
                return
            after = rows[-1][0]

    def _dead_chunk(self, after: bytes, where: DeadFilter) -> list[Any]:
        """Dead rows after fingerprint ``after``; narrowed in SQL by reason when given."""
        sql = (
            f"SELECT fp, host, request, attempt, reason, {self._dead_at()} "
            f"FROM frontier_requests WHERE state={_DEAD} AND fp > ?"
        )
        params: list[Any] = [after]
        if where.reason is not None:
            sql += " AND reason = ?"
            params.append(where.reason)
        return self._db().execute(f"{sql} ORDER BY fp LIMIT ?", [*params, _CHUNK]).fetchall()

    def _dead_letter(
        self, fp: bytes, request: str, reason: str | None, attempt: int, dead_at: int | None
    ) -> DeadLetter | None:
        try:
            return DeadLetter(CrawlRequest.from_json(request), reason or "", attempt, dead_at)
        except ValueError as exc:  # a file written by hand or by a broken crawlq
            logger.warning("skipping unreadable dead letter %s in %s: %s", fp.hex(), self.path, exc)
            return None

    async def replay_dead(
        self,
        where: DeadFilter = EVERY_DEAD,
        admit: Callable[[DeadLetter], bool] | None = None,
    ) -> int:
        """See `crawlq.frontier.base.Frontier.replay_dead`.

        Dead letters are chosen chunk by chunk and each chunk is requeued in one transaction
        that requeues only rows still dead.
        """
        replayed = 0
        async for chunk in self._chunks(self.dead_letters(where)):
            chosen = [d.request for d in chunk if admit is None or admit(d)]
            if chosen:
                revived = await self._run(self._tx, functools.partial(self._revive, chosen))
                self._counts[_DEAD] -= revived
                self._counts[_QUEUED] += revived
                replayed += revived
        if replayed:
            self._wake()
        return replayed

    @staticmethod
    async def _chunks(letters: AsyncIterator[DeadLetter]) -> AsyncIterator[list[DeadLetter]]:
        chunk: list[DeadLetter] = []
        async for letter in letters:
            chunk.append(letter)
            if len(chunk) >= _CHUNK:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def _revive(self, requests: Sequence[CrawlRequest], conn: sqlite3.Connection) -> int:
        hosts: Counter[str] = Counter()
        for request in requests:
            cur = conn.execute(
                "UPDATE frontier_requests SET state=0, attempt=0, reason=NULL, dead_at_ms=NULL "
                f"WHERE fp=? AND state={_DEAD} RETURNING host",
                (request.fingerprint,),
            )
            for (host,) in cur:
                hosts[host] += 1
        self._adjust_hosts(conn, hosts, Counter())
        self._host_answered(conn, hosts)  # replayed hosts start afresh: breaker closed
        return hosts.total()

    # -- policy, stats, close -------------------------------------------------------------

    async def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """See `crawlq.frontier.base.Frontier.set_host_policy`."""

        def step(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO frontier_hosts(host, delay_ms, concurrency) VALUES (?, ?, ?) "
                "ON CONFLICT(host) DO UPDATE SET delay_ms=excluded.delay_ms, "
                "concurrency=excluded.concurrency",
                (host, round(policy.delay_s * 1000), policy.concurrency),
            )

        await self._run(self._tx, step)
        self._wake()

    @staticmethod
    def _host_answered(conn: sqlite3.Connection, hosts: Counter[str]) -> None:
        conn.executemany(
            "UPDATE frontier_hosts SET pushbacks=0, failures=0, flags='' WHERE host=? "
            "AND (pushbacks > 0 OR failures > 0 OR flags != '')",
            [(host,) for host in hosts],
        )

    async def host_strike(self, host: str, strike: Strike, plan: StrikePlan) -> int:
        """See `crawlq.frontier.base.Frontier.host_strike`."""
        column = "pushbacks" if strike is Strike.PUSHBACK else "failures"
        now = self.clock.wall_ms()

        def step(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT OR IGNORE INTO frontier_hosts(host) VALUES (?)", (host,))
            (count, flags) = conn.execute(
                f"UPDATE frontier_hosts SET {column}={column}+1 WHERE host=? "
                f"RETURNING {column}, flags",
                (host,),
            ).fetchone()
            pause_ms = round(plan.pauses_s[min(count, len(plan.pauses_s)) - 1] * 1000)
            if plan.down_from and count >= plan.down_from:
                flags, until = "d", now  # drained at once, whatever its politeness
            else:
                if plan.probe_from and count >= plan.probe_from:
                    flags = "p"
                until = now + pause_ms
            conn.execute(
                "UPDATE frontier_hosts SET flags=?, next_at_ms=CASE WHEN ?='d' THEN ? "
                "ELSE max(next_at_ms, ?) END WHERE host=?",
                (flags, flags, until, until, host),
            )
            return int(count)

        count: int = await self._run(self._tx, step)
        self._wake()
        return count

    async def job_settings(self, proposed: dict[str, Any] | None) -> dict[str, Any] | None:
        """See `crawlq.frontier.base.Frontier.job_settings`."""

        def step(conn: sqlite3.Connection) -> dict[str, Any] | None:
            if proposed is not None:
                conn.execute(
                    "INSERT OR IGNORE INTO frontier_meta(key, value) VALUES ('job_settings', ?)",
                    (json.dumps(proposed, sort_keys=True),),
                )
            row = conn.execute(
                "SELECT value FROM frontier_meta WHERE key='job_settings'"
            ).fetchone()
            return None if row is None else dict(json.loads(row[0]))

        if proposed is None:  # a read: also in a read-only look
            return await self._run(lambda: step(self._db()))
        return await self._run(self._tx, step)

    # -- robots.txt -----------------------------------------------------------------------

    async def robots_get(self, origin: str) -> RobotsRecord | None:
        """See `crawlq.frontier.base.Frontier.robots_get`."""
        row = await self._run(
            lambda: (
                self._db()
                .execute("SELECT record FROM frontier_robots WHERE origin=?", (origin,))
                .fetchone()
            )
        )
        return None if row is None else self._robots_record(origin, row[0])

    def _robots_record(self, origin: str, data: Any) -> RobotsRecord | None:
        if data is None:
            return None
        try:
            return RobotsRecord.from_bytes(bytes(data))
        except (ValueError, TypeError) as exc:
            if origin not in self._robots_warned:
                self._robots_warned.add(origin)
                logger.warning("unreadable robots.txt record of %s, refetching: %s", origin, exc)
            return None

    async def robots_claim(
        self, origin: str, holder: str, ttl_s: float, *, force: bool = False
    ) -> tuple[RobotsRecord | None, bool]:
        """See `crawlq.frontier.base.Frontier.robots_claim`."""
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        now = self.clock.wall_ms()
        until = now + max(1, round(ttl_s * 1000))

        def step(conn: sqlite3.Connection) -> tuple[RobotsRecord | None, bool]:
            row = conn.execute(
                "SELECT record, claim_holder, claim_until_ms FROM frontier_robots WHERE origin=?",
                (origin,),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO frontier_robots(origin, claim_holder, claim_until_ms) "
                    "VALUES (?, ?, ?)",
                    (origin, holder, until),
                )
                return None, True
            record = self._robots_record(origin, row[0])
            if record is not None and record.fresh_at(now) and not force:
                return record, False
            if row[1] is not None and row[1] != holder and (row[2] or 0) > now:
                return record, False
            conn.execute(
                "UPDATE frontier_robots SET claim_holder=?, claim_until_ms=? WHERE origin=?",
                (holder, until, origin),
            )
            return record, True

        return await self._run(self._tx, step)

    async def robots_put(self, origin: str, record: RobotsRecord) -> None:
        """See `crawlq.frontier.base.Frontier.robots_put`."""
        data = record.to_bytes()

        def step(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO frontier_robots(origin, record) VALUES (?, ?) "
                "ON CONFLICT(origin) DO UPDATE SET record=excluded.record, "
                "claim_holder=NULL, claim_until_ms=NULL",
                (origin, data),
            )

        await self._run(self._tx, step)
        self._robots_warned.discard(origin)

    async def stats(self) -> FrontierStats:
        """See `crawlq.frontier.base.Frontier.stats`."""

        def read() -> tuple[list[Any], list[Any]]:
            db = self._db()
            hosts = db.execute(
                "SELECT host, queued, inflight, next_at_ms FROM frontier_hosts "
                "WHERE queued > 0 OR inflight > 0 ORDER BY queued DESC, inflight DESC LIMIT 20"
            ).fetchall()
            backoff = db.execute(
                "SELECT host, pushbacks, failures, flags, next_at_ms FROM frontier_hosts "
                "WHERE pushbacks > 0 OR failures > 0 OR flags != '' "
                "ORDER BY next_at_ms DESC LIMIT 20"
            ).fetchall()
            return hosts, backoff

        rows, troubled = await self._run(read)
        c = self._counts
        return FrontierStats(
            queued=c[_QUEUED],
            in_flight=c[_LEASED],
            delayed=c[_DELAYED],
            done=c[_DONE],
            dead=c[_DEAD],
            seen=c.total(),
            over_budget=self._over_budget,
            hosts=tuple(HostStats(*row) for row in rows),
            backoff=tuple(
                HostBackoff(host, pushbacks, failures, backoff_state(flags), next_at)
                for host, pushbacks, failures, flags, next_at in troubled
            ),
        )

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
