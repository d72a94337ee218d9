"""Opening the SQLite store's file: the connection, the schema, its versions and migrations.

The DDL is ``schema.sql`` beside this module (``CREATE ... IF NOT EXISTS``: the frontier may
share the file); ``store_meta`` records its version, `SCHEMA_VERSION`. Versions: 2 added
``pages.warc_file`` and ``warc_offset``, 3 ``pages.canonical_url``, 4 the referrers of pages
and dead letters, 5 ``pages.request`` and the partial index ``pages_spider_errors``, 6 the
``job`` of pages, dead letters and filtered records (NULL in rows written before), with an
index each for counting by job (`crawlq.store.sql.reads.CountQueries`). An older
file is migrated in one ``BEGIN IMMEDIATE`` transaction when a writable store opens it; a
read-only store reads it as it is (`crawlq.store.sql.reads.Queries`). A newer file is refused.

Errors: a file that stays locked past the busy timeout is `StoreUnavailable` (`translate`);
any other SQLite failure is `StoreError` naming the file.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sqlite3
from importlib import resources
from pathlib import Path

from crawlq.errors import StoreError, StoreUnavailable
from crawlq.secrecy import create_private
from crawlq.store.sql import SPIDER_ERROR_SQL

__all__ = ["SCHEMA_VERSION", "connect", "translate"]

logger = logging.getLogger("crawlq.store.sqlite")  # one logger for the whole backend

SCHEMA_VERSION = 6
"""Version of ``schema.sql`` this code reads and writes (stored in ``store_meta``)."""

_JOB_INDEXES = (
    "CREATE INDEX IF NOT EXISTS pages_job ON pages (job, status)",
    "CREATE INDEX IF NOT EXISTS dead_letters_job ON dead_letters (job, reason)",
    "CREATE INDEX IF NOT EXISTS filtered_job ON filtered (job, reason)",
)
"""The indexes of version 6 (also in ``schema.sql``): a job's counts, per status or reason."""

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
    5: (  # the job that wrote each record (Store.counts(job=...)); NULL before this step
        "ALTER TABLE pages ADD COLUMN job TEXT",
        "ALTER TABLE dead_letters ADD COLUMN job TEXT",
        "ALTER TABLE filtered ADD COLUMN job TEXT",
        *_JOB_INDEXES,
    ),
}
"""``_MIGRATIONS[v]`` brings a file at schema version ``v`` to ``v + 1``."""


def translate(path: Path, busy_s: float, exc: sqlite3.Error) -> StoreError:
    """The crawlq error for a SQLite failure on the store in ``path``."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreUnavailable(f"store {path} stayed locked for more than {busy_s} s: {exc}")
    return StoreError(f"store {path}: {exc}")


def connect(path: Path, busy_s: float, read_only: bool) -> tuple[sqlite3.Connection, int]:
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
            error = translate(path, busy_s, exc)
            if type(error) is StoreError:
                error = StoreError(f"cannot open store {path}: {exc}")
            raise error from exc
        raise
    return conn, SCHEMA_VERSION


@functools.cache
def _schema_statements() -> tuple[str, ...]:
    """Split ``schema.sql`` into statements (with SQLite's own tokenizer)."""
    text = resources.files("crawlq.store.sqlite").joinpath("schema.sql").read_text(encoding="utf-8")
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
