"""The shared result store: PostgreSQL through psycopg 3, imported only by this package.

One file per part of the store, as in `crawlq.store.sqlite`, and the two PostgreSQL has
besides:

* `crawlq.store.postgres.store`: `PostgresStore`, the `crawlq.store.Store` object, its
  writes (a flush and a reparse, each one transaction) and its reads' hooks;
* `crawlq.store.postgres.schema`: the DDL as migration steps, and the read-only check;
* `crawlq.store.postgres.pool`: where the store lives (URL, schema) and its connections;
* `crawlq.store.postgres.items_table`: the typed items table (``--items-table``).
"""

from __future__ import annotations

from crawlq.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
