"""SQLite-only behaviour: the file, its schema version, and sharing it with the frontier."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from crawlq.errors import ConfigError, StoreError, StoreUnavailable
from crawlq.records import DeadRecord, PageRecord
from crawlq.store import ResultBatch, open_store
from crawlq.store.sqlite import SqliteStore
from crawlq.store.sqlite.schema import SCHEMA_VERSION
from tests.store.conftest import sqlite_store_at_version


def page(n: int) -> PageRecord:
    url = f"https://example.com/{n}"
    return PageRecord(n.to_bytes(20, "big"), url, url, 200, "text/html", 0, None, n, 10, 0.1, 1)


def dead(n: int) -> DeadRecord:
    url = f"https://example.com/{n}"
    return DeadRecord(n.to_bytes(20, "big"), url, "timeout", "read timeout", 4, 0, float(n))


async def test_new_file_is_wal_with_a_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "crawlq.db"
    store = await SqliteStore.open(path)
    await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        version = conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'")
        assert version.fetchone() == (str(SCHEMA_VERSION),)
    conn.close()


async def test_reopening_keeps_data_and_frontier_tables(tmp_path: Path) -> None:
    path = tmp_path / "crawlq.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE frontier_queue (fingerprint BLOB PRIMARY KEY)")
    conn.commit()
    conn.close()
    store = await SqliteStore.open(path)
    await store.write(ResultBatch(pages=[page(1)]))
    await store.close()
    store = await SqliteStore.open(path)
    try:
        assert (await store.counts()).pages == 1
    finally:
        await store.close()


async def test_a_newer_schema_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "crawlq.db"
    await (await SqliteStore.open(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE store_meta SET value = '999' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"schema version 999, newer") as info:
        await SqliteStore.open(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("case", ["missing directory", "not a database", "a directory"])
async def test_a_path_that_cannot_be_opened_is_named(tmp_path: Path, case: str) -> None:
    if case == "missing directory":
        path = tmp_path / "nowhere" / "crawlq.db"
    elif case == "not a database":
        path = tmp_path / "notes.txt"
        path.write_text("this is not a database, " * 100)
    else:
        path = tmp_path
    with pytest.raises(StoreError, match="cannot open store") as info:
        await SqliteStore.open(path)
    assert str(path) in str(info.value)


def _hold_write_lock(path: Path, hold_s: float, locked: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO frontier_queue VALUES (randomblob(20))")
        locked.set()
        time.sleep(hold_s)
        conn.execute("COMMIT")
    finally:
        conn.close()


async def _store_with_frontier_table(path: Path, busy_timeout_s: float = 30.0) -> SqliteStore:
    store = await SqliteStore.open(path, busy_timeout_s=busy_timeout_s)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS frontier_queue (fingerprint BLOB PRIMARY KEY)")
    conn.commit()
    conn.close()
    return store


async def test_a_write_waits_for_the_frontier_lock(tmp_path: Path) -> None:
    path = tmp_path / "crawlq.db"
    store = await _store_with_frontier_table(path)
    locked = threading.Event()
    holder = asyncio.create_task(asyncio.to_thread(_hold_write_lock, path, 0.5, locked))
    try:
        await asyncio.to_thread(locked.wait, 5)
        started = time.monotonic()
        await store.write(ResultBatch(pages=[page(1)]))
        assert time.monotonic() - started >= 0.3
        assert (await store.counts()).pages == 1
    finally:
        await holder
        await store.close()


async def test_a_lock_held_past_the_busy_timeout_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "crawlq.db"
    store = await _store_with_frontier_table(path, busy_timeout_s=0.1)
    locked = threading.Event()
    holder = asyncio.create_task(asyncio.to_thread(_hold_write_lock, path, 1.0, locked))
    try:
        await asyncio.to_thread(locked.wait, 5)
        with pytest.raises(StoreUnavailable, match="locked"):
            await store.write(ResultBatch(pages=[page(1)]))
        await holder
        await store.write(ResultBatch(pages=[page(1)]))  # usable again once released
        assert (await store.counts()).pages == 1
    finally:
        await holder
        await store.close()


def _frontier_like_writer(path: Path, transactions: int, errors: list[BaseException]) -> None:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        for n in range(transactions):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO frontier_queue VALUES (?)", (n.to_bytes(20, "big"),))
            conn.execute("SELECT count(*) FROM pages").fetchone()  # reads our table too
            conn.execute("COMMIT")
    except BaseException as exc:
        errors.append(exc)
    finally:
        conn.close()


async def test_sharing_the_file_with_concurrent_writers_does_not_deadlock(
    tmp_path: Path,
) -> None:
    path = tmp_path / "crawlq.db"
    store = await _store_with_frontier_table(path)
    other = await SqliteStore.open(path)  # a second worker process's store
    errors: list[BaseException] = []
    frontier = asyncio.to_thread(_frontier_like_writer, path, 300, errors)
    try:
        async with asyncio.timeout(60):
            await asyncio.gather(
                frontier,
                *(store.write(ResultBatch(pages=[page(n)])) for n in range(100)),
                *(other.write(ResultBatch(dead=[dead(n)])) for n in range(100, 200)),
                *(store.counts() for _ in range(20)),
            )
        assert errors == []
        counts = await store.counts()
        assert (counts.pages, counts.dead) == (100, 100)
    finally:
        await other.close()
        await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM frontier_queue").fetchone() == (300,)
    conn.close()


_WRITER = """
import asyncio, hashlib, sys, time
from crawlq.records import PageRecord
from crawlq.store import ResultBatch
from crawlq.store.sqlite import SqliteStore

async def main():
    store = await SqliteStore.open(sys.argv[1])
    pages = [
        PageRecord(hashlib.sha1(str(n).encode()).digest(), f"https://e.com/{n}",
                   f"https://e.com/{n}", 200, "text/html", 0, None, float(n), 1, 0.1, 1)
        for n in range(500)
    ]
    await store.write(ResultBatch(pages=pages))
    print("written", flush=True)
    time.sleep(60)

asyncio.run(main())
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_returned_write_survives_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "crawlq.db"
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(_WRITER))
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "written"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM pages").fetchone() == (500,)
    conn.close()


@pytest.mark.parametrize("form", ["plain", "url"])
async def test_open_store_opens_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    monkeypatch.chdir(tmp_path)
    store = await open_store("results.db" if form == "plain" else "sqlite:///results.db")
    try:
        assert isinstance(store, SqliteStore)
        assert store.path.resolve() == (tmp_path / "results.db").resolve()
    finally:
        await store.close()
    absolute = await open_store(f"sqlite:///{tmp_path / 'abs.db'}")  # sqlite:////tmp/…
    await absolute.close()
    assert (tmp_path / "abs.db").exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://localhost/0", "unsupported store URL 'redis://localhost/0'"),
        ("sqlite:///", "no file path"),
        ("", "no file path"),
    ],
)
async def test_open_store_rejects_other_urls(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        await open_store(url)
    assert info.value.name == "store"


async def test_a_version_2_file_gains_canonical_url(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    store = await SqliteStore.open(path)
    await store.write(ResultBatch(pages=[page(1)]))
    await store.close()
    sqlite_store_at_version(path, 2)  # what a file made by crawlq with schema 2 looks like

    read_only = await SqliteStore.open(path, read_only=True)  # read as it is
    try:
        assert [p.canonical_url async for p in read_only.pages()] == [None]
    finally:
        await read_only.close()
    store = await SqliteStore.open(path)
    try:
        canonical = dataclasses.replace(page(2), canonical_url="https://e.com/the-one")
        await store.write(ResultBatch(pages=[canonical]))
        assert [p async for p in store.pages()] == [page(1), canonical]
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM store_meta WHERE key = 'schema_version'")
        assert version.fetchall() == [(str(SCHEMA_VERSION),)]
    db.close()


async def test_a_version_3_file_gains_the_referrers(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    store = await SqliteStore.open(path)
    await store.write(ResultBatch(pages=[page(1)], dead=[dead(2)]))
    await store.close()
    sqlite_store_at_version(path, 3)  # what a file made by crawlq with schema 3 looks like
    read_only = await SqliteStore.open(path, read_only=True)  # read as it is
    try:
        assert [p.referrer async for p in read_only.pages()] == [None]
        found = await read_only.lookup([page(1).fingerprint, dead(2).fingerprint])
        assert found[dead(2).fingerprint].dead == dead(2)
    finally:
        await read_only.close()
    store = await SqliteStore.open(path)
    try:
        linked = dataclasses.replace(page(3), referrer="https://e.com/")
        await store.write(ResultBatch(pages=[linked]))
        assert [p async for p in store.pages()] == [page(1), linked]
    finally:
        await store.close()


async def test_a_version_1_file_is_migrated_keeping_its_pages(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = await SqliteStore.open(path)
    await store.write(ResultBatch(pages=[page(1), page(2)]))
    await store.close()
    sqlite_store_at_version(path, 1)  # what a file made by crawlq with schema 1 looks like

    store = await SqliteStore.open(path)
    try:
        assert [p.url async for p in store.pages()] == [page(1).url, page(2).url]
        archived = dataclasses.replace(page(3), warc_file="a.warc.gz", warc_offset=9)
        await store.write(ResultBatch(pages=[archived]))
        assert [(p.warc_file, p.warc_offset) async for p in store.pages()] == [
            (None, None),
            (None, None),
            ("a.warc.gz", 9),
        ]
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM store_meta WHERE key = 'schema_version'")
        assert version.fetchall() == [(str(SCHEMA_VERSION),)]
    db.close()


async def test_a_version_5_file_is_migrated_its_rows_counting_for_no_job(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    store = await SqliteStore.open(path)
    await store.write(ResultBatch(pages=[page(1), page(2)], dead=[dead(3)]))
    await store.close()
    sqlite_store_at_version(path, 5)  # what a file made by crawlq with schema 5 looks like

    read_only = await SqliteStore.open(path, read_only=True)  # read as it is
    try:
        assert (await read_only.counts()).settled == 3
        assert (await read_only.counts(job="docs")).settled == 0
    finally:
        await read_only.close()
    store = await SqliteStore.open(path)
    try:
        assert [p async for p in store.pages()] == [page(1), page(2)]  # kept
        await store.write(ResultBatch(pages=[page(4)], dead=[dead(5)], job="docs"))
        docs = await store.counts(job="docs")
        assert (docs.pages, docs.dead) == (1, 1)
        total = await store.counts()
        assert (total.pages, total.dead) == (3, 2)  # the old rows count in the total only
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM store_meta WHERE key = 'schema_version'")
        assert version.fetchall() == [(str(SCHEMA_VERSION),)]
        jobs = db.execute("SELECT url, job FROM pages ORDER BY fetched_at").fetchall()
        assert [job for _, job in jobs] == [None, None, "docs"]
        plan = db.execute("EXPLAIN QUERY PLAN SELECT count(*) FROM pages WHERE job = 'docs'")
        assert "pages_job" in " ".join(str(row) for row in plan.fetchall())
    db.close()
