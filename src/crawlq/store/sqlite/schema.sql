-- crawlq result store, schema version 6 (see SCHEMA_VERSION in crawlq/store/sqlite/schema.py;
-- older files are migrated by the steps in _MIGRATIONS there).
--
-- These tables share one SQLite file with the frontier, whose tables are all prefixed
-- `frontier_`. Every statement is idempotent (IF NOT EXISTS); the loader runs them inside one
-- BEGIN IMMEDIATE transaction and records the version in `store_meta`.
-- Fingerprints are the 20-byte request fingerprints as BLOBs; times are Unix seconds (REAL).
-- No comma in the comment after a column: SQLite's DROP COLUMN of the column after it (as
-- tests do to make an older file) takes that comma for the column separator.

CREATE TABLE IF NOT EXISTS store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per fetched page (docs/architecture.md invariant 1: a fingerprint is in exactly one of
-- pages, dead_letters, filtered).
CREATE TABLE IF NOT EXISTS pages (
    fingerprint  BLOB PRIMARY KEY,
    url          TEXT NOT NULL,
    final_url    TEXT NOT NULL,
    status       INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    depth        INTEGER NOT NULL,
    title        TEXT,
    fetched_at   REAL NOT NULL,     -- Unix seconds
    size_bytes   INTEGER NOT NULL,
    elapsed_s    REAL NOT NULL,
    attempt      INTEGER NOT NULL,
    error        TEXT,
    spider       TEXT NOT NULL,
    body         BLOB,              -- NULL unless bodies are kept (store_body)
    warc_file    TEXT,              -- WARC file of the response record (warc_dir), or NULL
    warc_offset  INTEGER,           -- its byte offset in warc_file (or NULL)
    canonical_url TEXT,             -- <link rel="canonical"> resolved (or NULL)
    referrer     TEXT,              -- URL of the page that linked here or NULL (a seed)
    -- the fetched request as JSON (its callback and meta) or NULL (older pages)
    request      TEXT,
    job          TEXT               -- the shared job that wrote it or NULL (embedded; older rows)
);
-- Export order and the `since` filter (keyset pagination on fetched_at, fingerprint).
CREATE INDEX IF NOT EXISTS pages_fetched_at ON pages (fetched_at, fingerprint);
-- counts(): pages by status; a job's pages by status (counts(job=...)).
CREATE INDEX IF NOT EXISTS pages_status ON pages (status);
CREATE INDEX IF NOT EXISTS pages_job ON pages (job, status);
-- Pages the spider failed on (crawlq.store.sql.SPIDER_ERROR_SQL): counted by kind, exported
-- with --what errors and reparsed with --errors-only without reading the other pages.
CREATE INDEX IF NOT EXISTS pages_spider_errors ON pages (fetched_at, fingerprint)
    WHERE substr(error, 1, 14) = 'spider_error: ';

-- The items a spider yielded for a page, replaced as a whole when the page is written again.
CREATE TABLE IF NOT EXISTS items (
    fingerprint BLOB NOT NULL,      -- the page's fingerprint
    idx         INTEGER NOT NULL,   -- 0-based position among the page's items
    url         TEXT NOT NULL,
    spider      TEXT NOT NULL,
    data        TEXT NOT NULL,      -- the item as a JSON object
    created_at  REAL NOT NULL,      -- Unix seconds
    PRIMARY KEY (fingerprint, idx)
);
CREATE INDEX IF NOT EXISTS items_created_at ON items (created_at, fingerprint, idx);

-- URLs given up on.
CREATE TABLE IF NOT EXISTS dead_letters (
    fingerprint BLOB PRIMARY KEY,
    url         TEXT NOT NULL,
    reason      TEXT NOT NULL,
    detail      TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    depth       INTEGER NOT NULL,
    at          REAL NOT NULL,      -- Unix seconds
    referrer    TEXT,               -- URL of the page that linked here or NULL (a seed)
    job         TEXT                -- the shared job that wrote it or NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_at ON dead_letters (at, fingerprint);
CREATE INDEX IF NOT EXISTS dead_letters_reason ON dead_letters (reason);
CREATE INDEX IF NOT EXISTS dead_letters_job ON dead_letters (job, reason);

-- URLs deliberately not fetched (robots.txt …).
CREATE TABLE IF NOT EXISTS filtered (
    fingerprint BLOB PRIMARY KEY,
    url         TEXT NOT NULL,
    reason      TEXT NOT NULL,
    depth       INTEGER NOT NULL,
    at          REAL NOT NULL,      -- Unix seconds
    job         TEXT                -- the shared job that wrote it or NULL
);
CREATE INDEX IF NOT EXISTS filtered_at ON filtered (at, fingerprint);
CREATE INDEX IF NOT EXISTS filtered_reason ON filtered (reason);
CREATE INDEX IF NOT EXISTS filtered_job ON filtered (job, reason);
