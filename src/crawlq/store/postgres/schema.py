"""The PostgreSQL store's schema: its DDL as migration steps, and the code that runs them.

`STEPS` ``[i]`` brings a schema at version ``i`` to ``i + 1`` (version 0 is an empty schema);
`MIGRATIONS` are those steps as functions of a connection. Opening a store runs the missing
steps in one transaction (`ensure_schema`), under an advisory lock so that workers starting
together migrate once, and records the version in ``store_meta``. Steps run once each, in
order, so their DDL has no ``IF NOT EXISTS``: a table of the same name that crawlq did not
make is an error, not silently adopted. A new version is one more tuple at the end of
`STEPS` (or one more function at the end of `MIGRATIONS`); never edit a released one.

A read-only store creates and migrates nothing (`check_schema`): no tables is an error, an
older schema is read as it is (`crawlq.store.sql.reads.Queries`). A schema newer than this code is
refused either way with `StoreError` naming the URL and both versions.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from psycopg import sql

from crawlq.errors import StoreError
from crawlq.store.postgres.pool import Conn, Target

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "STEPS",
    "V1",
    "V2",
    "V3",
    "V4",
    "V5",
    "V6",
    "Migration",
    "check_schema",
    "ensure_schema",
]

logger = logging.getLogger("crawlq.store.postgres")  # one logger for the whole backend

V1 = (
    "CREATE TABLE store_meta (key text PRIMARY KEY, value text NOT NULL)",
    # One row per settled fingerprint: the lock that serialises writers across the three kinds.
    """CREATE TABLE outcomes (
        fingerprint bytea PRIMARY KEY CHECK (octet_length(fingerprint) = 20),
        kind        text NOT NULL CHECK (kind IN ('page', 'dead', 'filtered'))
    )""",
    """CREATE TABLE pages (
        fingerprint  bytea PRIMARY KEY,
        url          text NOT NULL,
        final_url    text NOT NULL,
        status       integer NOT NULL,
        content_type text NOT NULL,
        depth        integer NOT NULL,
        title        text,
        fetched_at   double precision NOT NULL,
        size_bytes   bigint NOT NULL,
        elapsed_s    double precision NOT NULL,
        attempt      integer NOT NULL,
        error        text,
        spider       text NOT NULL,
        body         bytea
    )""",
    "CREATE INDEX pages_fetched_at ON pages (fetched_at, fingerprint)",
    "CREATE INDEX pages_status ON pages (status)",
    """CREATE TABLE items (
        fingerprint bytea NOT NULL,
        idx         integer NOT NULL,
        url         text NOT NULL,
        spider      text NOT NULL,
        data        jsonb NOT NULL,
        created_at  double precision NOT NULL,
        PRIMARY KEY (fingerprint, idx)
    )""",
    "CREATE INDEX items_created_at ON items (created_at, fingerprint, idx)",
    """CREATE TABLE dead_letters (
        fingerprint bytea PRIMARY KEY,
        url         text NOT NULL,
        reason      text NOT NULL,
        detail      text NOT NULL,
        attempts    integer NOT NULL,
        depth       integer NOT NULL,
        at          double precision NOT NULL
    )""",
    "CREATE INDEX dead_letters_at ON dead_letters (at, fingerprint)",
    "CREATE INDEX dead_letters_reason ON dead_letters (reason)",
    """CREATE TABLE filtered (
        fingerprint bytea PRIMARY KEY,
        url         text NOT NULL,
        reason      text NOT NULL,
        depth       integer NOT NULL,
        at          double precision NOT NULL
    )""",
    "CREATE INDEX filtered_at ON filtered (at, fingerprint)",
    "CREATE INDEX filtered_reason ON filtered (reason)",
    "COMMENT ON TABLE outcomes IS 'crawlq: the one outcome of each request fingerprint'",
    "COMMENT ON COLUMN pages.fetched_at IS 'Unix seconds'",
    "COMMENT ON COLUMN items.created_at IS 'Unix seconds'",
    "COMMENT ON COLUMN dead_letters.at IS 'Unix seconds'",
    "COMMENT ON COLUMN filtered.at IS 'Unix seconds'",
)
"""Version 1: pages, items, dead letters, filtered URLs and the outcome lock rows."""

V2 = (
    # WARC archiving (warc_dir): where each page's response record is.
    "ALTER TABLE pages ADD COLUMN warc_file text, ADD COLUMN warc_offset bigint",
    "COMMENT ON COLUMN pages.warc_file IS 'WARC file name of the response record, or NULL'",
    "COMMENT ON COLUMN pages.warc_offset IS 'byte offset of that record in warc_file'",
)
"""Version 2: ``pages.warc_file`` and ``pages.warc_offset``."""

V3 = (
    # What pages say: <link rel="canonical">.
    "ALTER TABLE pages ADD COLUMN canonical_url text",
    "COMMENT ON COLUMN pages.canonical_url IS '<link rel=canonical> of the page, or NULL'",
)
"""Version 3: ``pages.canonical_url``."""

V4 = (
    # The page that linked to each page and dead letter (crawlq inspect, crawlq dead list).
    "ALTER TABLE pages ADD COLUMN referrer text",
    "ALTER TABLE dead_letters ADD COLUMN referrer text",
    "COMMENT ON COLUMN pages.referrer IS 'URL of the page that linked here, or NULL'",
    "COMMENT ON COLUMN dead_letters.referrer IS 'URL of the page that linked here, or NULL'",
)
"""Version 4: ``pages.referrer`` and ``dead_letters.referrer``."""

V5 = (
    # Spider errors: the fetched request (its callback, meta…) for reparse, and an index of
    # the pages whose error is a spider error (crawlq.store.sql.SPIDER_ERROR_SQL).
    "ALTER TABLE pages ADD COLUMN request text",
    "CREATE INDEX pages_spider_errors ON pages (fetched_at, fingerprint)"
    " WHERE substr(error, 1, 14) = 'spider_error: '",
    "COMMENT ON COLUMN pages.request IS 'the fetched request as JSON (callback, meta…), or NULL'",
)
"""Version 5: ``pages.request`` and the partial index ``pages_spider_errors``."""

V6 = (
    # The shared job that wrote each record (Store.counts(job=...)); NULL in older rows.
    "ALTER TABLE pages ADD COLUMN job text",
    "ALTER TABLE dead_letters ADD COLUMN job text",
    "ALTER TABLE filtered ADD COLUMN job text",
    "CREATE INDEX pages_job ON pages (job, status)",
    "CREATE INDEX dead_letters_job ON dead_letters (job, reason)",
    "CREATE INDEX filtered_job ON filtered (job, reason)",
    "COMMENT ON COLUMN pages.job IS 'the shared job that wrote the page, or NULL'",
    "COMMENT ON COLUMN dead_letters.job IS 'the shared job that wrote it, or NULL'",
    "COMMENT ON COLUMN filtered.job IS 'the shared job that wrote it, or NULL'",
)
"""Version 6: ``job`` on pages, dead letters and filtered records, indexed for counting."""

STEPS: tuple[tuple[str, ...], ...] = (V1, V2, V3, V4, V5, V6)
"""The migration steps in order; the schema version is ``len(STEPS)``."""


Migration = Callable[[Conn], Awaitable[None]]
"""One schema step: given a connection inside the migrating transaction, with ``search_path``
set to the store's schema, bring the schema from version ``i`` to ``i + 1``."""


def _statements(statements: tuple[str, ...]) -> Migration:
    """A migration step that runs ``statements`` in order."""

    async def step(conn: Conn) -> None:
        for statement in statements:
            await conn.execute(statement)

    return step


MIGRATIONS: tuple[Migration, ...] = tuple(_statements(step) for step in STEPS)
"""``MIGRATIONS[i]`` brings a schema at version ``i`` to ``i + 1``; version 0 is empty."""

SCHEMA_VERSION = len(STEPS)
"""Version of the schema this code reads and writes: ``len(MIGRATIONS)``."""

_HAS_PAGES = "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'pages'"


async def check_schema(conn: Conn, target: Target) -> int:
    """Read-only open: the version of the store at ``target``; creates and migrates nothing.

    Versions 1.. are read as they are (1 lacks the WARC columns, 1 and 2 ``canonical_url``,
    1 to 3 the referrers: `pages` reads NULL). A future step readers cannot bridge is
    refused here: "a crawl of this crawlq migrates it".
    """
    cur = await conn.execute(_HAS_PAGES, (target.schema,))
    version = await _schema_version(conn, target) if await cur.fetchone() else -1
    if version <= 0:  # no pages table (-1), or no store_meta (0): no store of crawlq's
        missing = "store_meta" if version == 0 else "pages"
        detail = f"schema {target.schema} has no {missing} table"
        raise StoreError(f"no crawlq store in {target.display} ({detail})")
    _check_not_newer(target, version, len(MIGRATIONS))
    return version


async def ensure_schema(conn: Conn, target: Target) -> None:
    """Create the schema when missing and run the `MIGRATIONS` it lacks, in one transaction."""
    latest = len(MIGRATIONS)
    async with conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"crawlq.store:{target.schema}",),
        )
        cur = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (target.schema,))
        if await cur.fetchone() is None:
            await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(target.schema)))
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


def _check_not_newer(target: Target, version: int, latest: int) -> None:
    if version > latest:
        raise StoreError(
            f"PostgreSQL store {target.name} has schema version {version}, newer than the"
            f" {latest} this crawlq supports; upgrade crawlq or use another schema"
        )


async def _schema_version(conn: Conn, target: Target) -> int:
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
