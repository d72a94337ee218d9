"""What the rows of the frontier's tables mean: request states and host limits, as SQL.

The DDL is ``crawlq/frontier/schema.sql``. A request row (``frontier_requests``) is in one of
the states below; a state is written into the SQL as its number (`QUEUED` is ``0``…), never
bound as a parameter, so that SQLite can use the partial index on it (``frontier_queue``,
``frontier_delayed``, ``frontier_leased``, ``frontier_fetched``, ``frontier_dead``).

A host row (``frontier_hosts``) holds the host's queue and in-flight counts, the Unix ms its
next request may start (``next_at_ms``), its politeness (NULL: the job's default) and its
strikes (`crawlq.rules.politeness`): ``flags`` is ``'p'`` while probing (one request at a time) and
``'d'`` while down (its requests are dead-lettered at once, without a request).
"""

from __future__ import annotations

from crawlq.frontier.inspection import StateName

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
    "STATE_NAMES",
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
