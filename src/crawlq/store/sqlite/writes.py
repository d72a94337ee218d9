"""The SQLite store's writes: a flush (`write`) and a reparse (`replace_parse`), on its thread.

Each is one ``BEGIN IMMEDIATE`` transaction: it takes the file's single write lock up front
and waits up to the busy timeout for the frontier's connection to release it, instead of
failing on a lock upgrade. Item data is serialised before the lock is taken, so a bad item
fails the call without touching the file. Rows are written with the shared statements of
`crawlq.store.sql.writes` (SQLite keeps NUL characters and the spider's key order).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.store.contract import ParseUpdate, ResultBatch
from crawlq.store.sql import SQLITE
from crawlq.store.sql.writes import Writes, item_json

__all__ = ["replace_parse", "write"]

_SQL = Writes.of(SQLITE)
_REPARSED_PAGE = "UPDATE pages SET error = ?, spider = ? WHERE fingerprint = ? AND fetched_at = ?"


def write(batch: ResultBatch, conn: sqlite3.Connection) -> None:
    """Write a resolved batch in one IMMEDIATE transaction."""
    item_rows = [_item_row(item) for item in batch.items]  # fail before taking the lock
    job = batch.job
    page_rows = [
        (
            p.fingerprint,
            p.url,
            p.final_url,
            p.status,
            p.content_type,
            p.depth,
            p.title,
            p.fetched_at,
            p.size_bytes,
            p.elapsed_s,
            p.attempt,
            p.error,
            p.spider,
            p.body,
            p.warc_file,
            p.warc_offset,
            p.canonical_url,
            p.referrer,
            p.request,
            job,
        )
        for p in batch.pages
    ]
    dead_rows = [
        (d.fingerprint, d.url, d.reason, d.detail, d.attempts, d.depth, d.at, d.referrer, job)
        for d in batch.dead
    ]
    filtered_rows = [(f.fingerprint, f.url, f.reason, f.depth, f.at, job) for f in batch.filtered]
    conn.execute("BEGIN IMMEDIATE")
    try:
        if page_rows:
            _delete(conn, ("dead_letters", "filtered", "items"), batch.pages)
            conn.executemany(_SQL.upsert_page, page_rows)
        if dead_rows:
            _delete(conn, ("pages", "items", "filtered"), batch.dead)
            conn.executemany(_SQL.upsert_dead, dead_rows)
        if item_rows:  # after both deletes: a page's or a dead letter's (errback) items
            conn.executemany(_SQL.insert_item, item_rows)
        if filtered_rows:
            _delete(conn, ("pages", "items", "dead_letters"), batch.filtered)
            conn.executemany(_SQL.upsert_filtered, filtered_rows)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def replace_parse(updates: Sequence[ParseUpdate], conn: sqlite3.Connection) -> frozenset[bytes]:
    """Apply `ParseUpdate` s in one IMMEDIATE transaction; returns the pages updated."""
    items = {u.fingerprint: [_item_row(item) for item in u.items] for u in updates}  # may raise
    updated: set[bytes] = set()
    conn.execute("BEGIN IMMEDIATE")
    try:
        for u in updates:
            cursor = conn.execute(_REPARSED_PAGE, (u.error, u.spider, u.fingerprint, u.fetched_at))
            if cursor.rowcount == 0:
                continue  # gone, or fetched again since it was read: the newer fetch wins
            updated.add(u.fingerprint)
            conn.execute("DELETE FROM items WHERE fingerprint = ?", (u.fingerprint,))
            conn.executemany(_SQL.insert_item, items[u.fingerprint])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return frozenset(updated)


def _item_row(item: ItemRecord) -> tuple[Any, ...]:
    return (item.fingerprint, item.index, item.url, item.spider, item_json(item), item.created_at)


def _delete(
    conn: sqlite3.Connection,
    tables: tuple[str, ...],
    records: Sequence[PageRecord | DeadRecord | FilteredRecord],
) -> None:
    keys = [(r.fingerprint,) for r in records]
    for table in tables:
        conn.executemany(f"DELETE FROM {table} WHERE fingerprint = ?", keys)
