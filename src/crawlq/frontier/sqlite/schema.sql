-- crawlq embedded frontier (SQLite). Shares its file with the SQLite store (tables pages, items, ...).
-- state: 0 queued, 1 leased, 2 delayed (retry due at ready_at_ms), 3 done, 4 dead,
-- 5 leased with its request done on the wire (its host slot given back; schema version 2).
-- dead_at_ms (schema version 4; added by SqliteFrontier to older files): when it was
-- dead-lettered.
CREATE TABLE IF NOT EXISTS frontier_requests (
    fp          BLOB PRIMARY KEY,      -- 20-byte SHA-1 fingerprint
    seq         INTEGER NOT NULL,      -- push order: FIFO within a priority
    host        TEXT NOT NULL,         -- politeness key
    priority    INTEGER NOT NULL,      -- higher first
    state       INTEGER NOT NULL,
    ready_at_ms INTEGER NOT NULL DEFAULT 0,
    attempt     INTEGER NOT NULL DEFAULT 0,   -- deliveries so far
    lease_id    TEXT,
    worker_id   TEXT,
    deadline_ms INTEGER,
    reason      TEXT,                  -- last retry reason, or the dead-letter reason
    request     TEXT NOT NULL,         -- CrawlRequest.to_json()
    dead_at_ms  INTEGER                -- Unix ms it was dead-lettered (state 4)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS frontier_queue ON frontier_requests (host, priority DESC, seq) WHERE state = 0;
CREATE INDEX IF NOT EXISTS frontier_delayed ON frontier_requests (ready_at_ms) WHERE state = 2;
CREATE INDEX IF NOT EXISTS frontier_leased ON frontier_requests (deadline_ms) WHERE state = 1;
CREATE INDEX IF NOT EXISTS frontier_fetched ON frontier_requests (deadline_ms) WHERE state = 5;
CREATE INDEX IF NOT EXISTS frontier_dead ON frontier_requests (fp) WHERE state = 4;

CREATE TABLE IF NOT EXISTS frontier_hosts (
    host        TEXT PRIMARY KEY,
    queued      INTEGER NOT NULL DEFAULT 0,
    inflight    INTEGER NOT NULL DEFAULT 0,
    next_at_ms  INTEGER NOT NULL DEFAULT 0,
    delay_ms    INTEGER,               -- NULL: the frontier's default policy
    concurrency INTEGER,
    pushbacks   INTEGER NOT NULL DEFAULT 0,  -- 429/503 answers in a row (schema version 3)
    failures    INTEGER NOT NULL DEFAULT 0,  -- connection failures in a row
    flags       TEXT NOT NULL DEFAULT '',    -- 'p' probing (one at a time), 'd' down
    admitted    INTEGER NOT NULL DEFAULT 0   -- URLs of the host ever pushed (schema version 4)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS frontier_hosts_ready ON frontier_hosts (next_at_ms) WHERE queued > 0;

CREATE TABLE IF NOT EXISTS frontier_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- One robots.txt record per origin, shared by the job's workers (schema version 3).
-- record: crawlq.frontier.robots.RobotsRecord.to_bytes(), NULL while only claimed.
-- claim_holder, claim_until_ms: who is fetching it now, and until when the claim holds.
CREATE TABLE IF NOT EXISTS frontier_robots (
    origin         TEXT PRIMARY KEY,   -- scheme://host[:port]
    record         BLOB,
    claim_holder   TEXT,
    claim_until_ms INTEGER
) WITHOUT ROWID;

-- Item dedup: each key digest's owner page (crawlq.frontier.items.ItemKeys.claim_item_keys).
-- key: crawlq.items.item_key (20 bytes, never a value); owner: the page's record fingerprint.
CREATE TABLE IF NOT EXISTS frontier_item_keys (
    key   BLOB PRIMARY KEY,
    owner BLOB NOT NULL
);

-- One row per proxy that failed since its last success (crawlq.proxies): its id is 16 hex
-- digits of a SHA-1 of scheme://host:port, never its credentials. Created by any owner's open
-- (IF NOT EXISTS), so no schema version is needed for it.
CREATE TABLE IF NOT EXISTS frontier_proxies (
    id        TEXT PRIMARY KEY,
    failures  INTEGER NOT NULL DEFAULT 0,  -- in a row, since its last success or bench
    benches   INTEGER NOT NULL DEFAULT 0,  -- benches in a row: the next one is longer
    until_ms  INTEGER NOT NULL DEFAULT 0   -- Unix ms its bench ends
) WITHOUT ROWID;
