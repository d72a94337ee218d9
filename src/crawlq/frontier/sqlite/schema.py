"""The frontier's SQLite file: what its rows mean, the ownership lock, the connection, versions.

The DDL is ``schema.sql`` beside this module. A request row (``frontier_requests``) is in one of
the states below; a state is written into the SQL as its number (`QUEUED` is ``0``…), never
bound as a parameter, so that SQLite can use the partial index on it (``frontier_queue``,
``frontier_delayed``, ``frontier_leased``, ``frontier_fetched``, ``frontier_dead``).

A host row (``frontier_hosts``) holds the host's queue and in-flight counts, the Unix ms its
next request may start (``next_at_ms``), its politeness (NULL: the job's default) and its
strikes (`crawlq.rules.politeness`): ``flags`` is ``'p'`` while probing (one request at a
time) and ``'d'`` while down (its requests are dead-lettered at once, without a request).

The DDL (``CREATE ... IF NOT EXISTS``) is run at every owned open; ``frontier_meta`` records
the schema version. Versions:

1. requests, hosts and meta tables;
2. state 5 (`FETCHED`: leased, its host slot freed by
   ``lease(fetched=...)``);
3. ``frontier_robots`` (the job's robots.txt cache, in ``schema.sql``), and
   ``frontier_hosts.pushbacks``, ``failures``, ``flags`` (host backoff and breaker);
4. ``frontier_hosts.admitted`` (URLs of the host ever pushed: the ``max_pages_per_host``
   budget), filled from ``frontier_requests`` when an older file is opened;
5. ``frontier_requests.dead_at_ms`` (``crawlq dead list --since``), index ``frontier_dead``.

An owner migrates an older file in place; a read-only look reads it as it is (`read_version`).
A file newer than `SCHEMA_VERSION` is refused either way with `FrontierError`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections import Counter
from importlib import resources
from pathlib import Path

from crawlq.errors import FrontierError, FrontierLocked, FrontierUnavailable
from crawlq.frontier.inspection import StateName
from crawlq.secrecy import PRIVATE_MODE, create_private

__all__ = [
    "CHUNK",
    "DEAD",
    "DELAYED",
    "DONE",
    "FETCHED",
    "HELD",
    "HOST_CONCURRENCY",
    "HOST_DELAY",
    "LEASED",
    "OVER_BUDGET",
    "QUEUED",
    "SCHEMA_VERSION",
    "STATE_NAMES",
    "connect",
    "connect_read_only",
    "count_states",
    "lock",
    "migrate",
    "read_version",
    "requeue_held",
]

QUEUED, LEASED, DELAYED, DONE, DEAD, FETCHED = range(6)
"""Request states: waiting for a lease; leased; waiting for its retry time (``ready_at_ms``);
stored; dead-lettered; leased with its request done on the wire (schema version 2)."""

HELD = f"state IN ({LEASED}, {FETCHED})"
"""SQL condition of a leased row. `FETCHED` rows are leased too (counted as in flight) but no
longer hold one of their host's concurrency slots."""

STATE_NAMES: dict[int, StateName] = {
    QUEUED: "queued",
    LEASED: "in_flight",
    FETCHED: "in_flight",
    DELAYED: "delayed",
    DONE: "done",
    DEAD: "dead",
}
"""The contract's name of each state (`crawlq.frontier.inspection.UrlState`)."""

HOST_CONCURRENCY = (
    "CASE flags WHEN 'p' THEN 1 WHEN 'd' THEN 1000000 ELSE coalesce(concurrency, ?) END"
)
"""SQL of a host's effective concurrency; its parameter is the default concurrency."""

HOST_DELAY = "CASE flags WHEN 'd' THEN 0 ELSE coalesce(delay_ms, ?) END"
"""SQL of a host's effective delay in ms; its parameter is the default delay in ms."""

OVER_BUDGET = "over_budget"
"""``frontier_meta`` key: how many new URLs ``max_pages_per_host`` kept out."""

CHUNK = 500
"""Parameters per ``IN (...)`` statement and rows per dead-letter read (SQLite allows 32,766)."""

SCHEMA_VERSION = 5
"""Version of the schema this code reads and writes (module docstring)."""

_HOST_COLUMNS_V3 = {
    "pushbacks": "INTEGER NOT NULL DEFAULT 0",
    "failures": "INTEGER NOT NULL DEFAULT 0",
    "flags": "TEXT NOT NULL DEFAULT ''",
}
_HOST_COLUMNS_V4 = {"admitted": "INTEGER NOT NULL DEFAULT 0"}
_REQUEST_COLUMNS_V5 = {"dead_at_ms": "INTEGER"}
_TABLES = {"frontier_requests", "frontier_meta", "frontier_hosts"}


def lock(path: Path) -> int:
    """Take the exclusive ``flock`` on ``<path>.lock`` and write our pid into it.

    Returns:
        The lock file's descriptor; closing it gives up ownership.

    Raises:
        FrontierLocked: Another live process holds the lock (the message names its pid).
        FrontierUnavailable: The lock file cannot be opened.
    """
    # The lock belongs to the file, not to the name: a symlink must find the same lock.
    lock_path = f"{os.path.realpath(path)}.lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, PRIVATE_MODE)
    except OSError as exc:
        raise FrontierUnavailable(f"cannot open {lock_path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown pid"
        os.close(fd)
        raise FrontierLocked(str(path), f"pid {holder}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def connect(path: Path) -> sqlite3.Connection:
    """Open (or create, mode 0600) the file in WAL mode and create any missing table.

    Raises:
        FrontierUnavailable: The file cannot be opened (missing directory, not a database).
    """
    try:
        with contextlib.suppress(OSError):  # a missing directory: sqlite3 says so below
            create_private(path)  # 0600, and so its -wal and -shm files
        conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
        schema = resources.files("crawlq.frontier.sqlite").joinpath("schema.sql").read_text()
        conn.executescript(schema)
    except sqlite3.Error as exc:
        raise FrontierUnavailable(f"cannot open frontier {path}: {exc}") from exc
    return conn


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Record the version of a new file, or bring an older one to `SCHEMA_VERSION`.

    Raises:
        FrontierError: The file was written by a newer crawlq.
    """
    row = conn.execute("SELECT value FROM frontier_meta WHERE key='schema_version'").fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO frontier_meta(key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        return
    _check_not_newer(path, int(row[0]))
    if int(row[0]) == SCHEMA_VERSION:
        return
    for table, columns in (  # schema.sql added what version 2 and 3's robots table need
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
        "UPDATE frontier_meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),)
    )


def requeue_held(conn: sqlite3.Connection) -> int:
    """Put the leases of an earlier, interrupted owner back in the queue (one transaction).

    Each keeps its delivery count; every host's in-flight count starts at zero again.

    Returns:
        How many leases were requeued.
    """
    conn.execute("BEGIN IMMEDIATE")
    recovered = conn.execute(
        f"UPDATE frontier_requests SET state={QUEUED}, lease_id=NULL, worker_id=NULL, "
        f"deadline_ms=NULL WHERE {HELD}"
    ).rowcount
    conn.execute(
        "UPDATE frontier_hosts SET inflight=0, queued=(SELECT count(*) FROM "
        f"frontier_requests r WHERE r.state={QUEUED} AND r.host=frontier_hosts.host)"
    )
    conn.execute("COMMIT")
    return int(recovered)


def count_states(conn: sqlite3.Connection) -> Counter[int]:
    """Requests per state; `FETCHED` rows are counted under `LEASED` (both are in flight)."""
    counts = Counter(
        dict(conn.execute("SELECT state, count(*) FROM frontier_requests GROUP BY state"))
    )
    fetched = counts.pop(FETCHED, 0)
    if fetched:
        counts[LEASED] += fetched
    return counts


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Open an existing file read-only; nothing is created.

    Raises:
        FrontierError: No such file.
        FrontierUnavailable: It cannot be opened.
    """
    if not path.is_file():
        raise FrontierError(f"no crawlq frontier in {path}: no such file")
    try:
        uri = f"{path.resolve().as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, isolation_level=None, timeout=30.0, uri=True)
        conn.execute("PRAGMA busy_timeout=30000")
    except sqlite3.Error as exc:
        raise FrontierUnavailable(f"cannot open frontier {path}: {exc}") from exc
    return conn


def read_version(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version a read-only look reads the file as (4: no ``dead_at_ms`` column).

    Raises:
        FrontierError: The file holds no crawlq frontier, or was written by a newer crawlq.
        FrontierUnavailable: The file cannot be read.
    """
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as exc:
        raise FrontierUnavailable(f"cannot open frontier {path}: {exc}") from exc
    if not tables >= _TABLES:
        raise FrontierError(f"no crawlq frontier in {path} (no frontier tables)")
    row = conn.execute("SELECT value FROM frontier_meta WHERE key='schema_version'").fetchone()
    _check_not_newer(path, int(row[0]) if row is not None else 1)
    have = {r[1] for r in conn.execute("PRAGMA table_info(frontier_requests)")}
    return SCHEMA_VERSION if "dead_at_ms" in have else 4


def _check_not_newer(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise FrontierError(
            f"{path} has frontier schema version {version}, newer than this crawlq "
            f"understands ({SCHEMA_VERSION}); upgrade crawlq"
        )
