"""The embedded result store: SQLite, in the file the embedded frontier uses too.

One file per part of the store, as in `crawlq.store.postgres`:

* `crawlq.store.sqlite.store`: `SqliteStore`, the `crawlq.store.Store` object, its thread,
  its writes (a flush and a reparse, each one ``BEGIN IMMEDIATE`` transaction) and its
  reads' hooks;
* `crawlq.store.sqlite.schema`: opening the file, the schema (``schema.sql`` beside it), its
  versions and migrations, and the errors.
"""

from __future__ import annotations

from crawlq.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
