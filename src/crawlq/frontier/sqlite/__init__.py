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

Where each part lives (one module per contract, `crawlq.frontier.contract`, named as the
contract's and as the Redis backend's):

* ``queue``: push (``bounded``: under queue bounds), lease, renew, the settles and stats;
* ``hosts``: host politeness, strikes and proxy failures;
* ``robots``: the robots.txt cache; ``job``: the job's settings;
* ``inspection``: one URL's state, dead letters and their replay; ``items``: the owners of
  item dedup keys;
* ``file``: the thread, transactions and the bookkeeping the parts share;
* ``schema``: what a row's state and a host's flags mean, as SQL; the lock, the connection,
  schema versions and migrations (the DDL is ``schema.sql`` beside it).
"""

from __future__ import annotations

from crawlq.frontier.sqlite.hosts import SqliteHostRules
from crawlq.frontier.sqlite.inspection import SqliteInspection
from crawlq.frontier.sqlite.items import SqliteItemKeys
from crawlq.frontier.sqlite.job import SqliteJobRecord
from crawlq.frontier.sqlite.queue import SqliteWorkQueue
from crawlq.frontier.sqlite.robots import SqliteRobots
from crawlq.frontier.sqlite.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "SqliteFrontier"]


class SqliteFrontier(
    SqliteWorkQueue,
    SqliteHostRules,
    SqliteRobots,
    SqliteJobRecord,
    SqliteInspection,
    SqliteItemKeys,
):
    """`crawlq.frontier.contract.Frontier` on a SQLite file. Create with `SqliteFrontier.open`.

    Args:
        path: The database file (created if missing).
        politeness: The job's host politeness rules.
        clock: Source of "now" (tests pass a `crawlq.clock.ManualClock`).
        read_only: Look without owning (module docstring).
    """
