"""DDL of the PostgreSQL store, as the migration steps that build its schema.

`STEPS` ``[i]`` brings a schema at version ``i`` to ``i + 1`` (version 0 is an empty schema);
`crawlq.store.postgres` runs the missing steps in one transaction when a store is opened and
records the version in ``store_meta``. Steps run once each, in order, so their DDL has no
``IF NOT EXISTS``: a table of the same name that crawlq did not make is an error, not silently
adopted. A new version is one more tuple at the end of `STEPS`; never edit a released one.
"""

from __future__ import annotations

__all__ = ["STEPS", "V1", "V2", "V3", "V4", "V5"]

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
    # the pages whose error is a spider error (crawlq.store.base.SPIDER_ERROR_SQL).
    "ALTER TABLE pages ADD COLUMN request text",
    "CREATE INDEX pages_spider_errors ON pages (fetched_at, fingerprint)"
    " WHERE substr(error, 1, 14) = 'spider_error: '",
    "COMMENT ON COLUMN pages.request IS 'the fetched request as JSON (callback, meta…), or NULL'",
)
"""Version 5: ``pages.request`` and the partial index ``pages_spider_errors``."""

STEPS: tuple[tuple[str, ...], ...] = (V1, V2, V3, V4, V5)
"""The migration steps in order; the schema version is ``len(STEPS)``."""
