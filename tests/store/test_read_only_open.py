"""Read-only uses of a store (``crawlq export``, ``crawlq status``) create and migrate nothing.

Where there is no store they fail with one line naming it (without a password); an existing
store, also one at an older schema version, is read as it is.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from crawlq.engine.job import bind_job
from crawlq.errors import StoreError
from crawlq.frontier import open_frontier
from crawlq.settings import Settings
from crawlq.store import ResultBatch, open_store
from crawlq.store.sqlite import SqliteStore
from tests.conftest import run_crawlq

from .test_contract import page

psycopg = pytest.importorskip("psycopg")

from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from crawlq.store.postgres import PostgresStore  # noqa: E402
from crawlq.store.postgres import schema as postgres_schema  # noqa: E402


def in_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def shown(url: str) -> str:
    """The store's name in messages: no password, explicit port."""
    p = conninfo_to_dict(url)
    user = f"{p['user']}@" if p.get("user") else ""
    return (
        f"postgresql://{user}{p.get('host') or 'localhost'}:{p.get('port') or 5432}/{p['dbname']}"
    )


async def query(url: str, statement: str | sql.Composed, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(statement, params or None)
        return await cur.fetchall() if cur.description else []


async def schema_objects(url: str, schema: str) -> tuple[int, list[str]]:
    [(schemas,)] = await query(url, "SELECT count(*) FROM pg_namespace WHERE nspname = %s", schema)
    tables = await query(url, "SELECT tablename FROM pg_tables WHERE schemaname = %s", schema)
    return schemas, sorted(t for (t,) in tables)


@pytest.mark.parametrize("existing", [False, True], ids=["no-schema", "empty-schema"])
async def test_export_where_there_is_no_store_fails_and_creates_nothing(
    postgres_url: str, schema: str, existing: bool
) -> None:
    if existing:
        await query(postgres_url, sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    with_password = make_conninfo(postgres_url, password="s3cret-pw")  # trust ignores it
    url = in_schema(_as_url(with_password), schema)
    proc = run_crawlq("export", "--store", url, check=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == (
        f"crawlq: cannot export: no crawlq store in {shown(postgres_url)}"
        f" (schema {schema} has no pages table)\n"
    )
    assert "s3cret-pw" not in proc.stderr
    assert await schema_objects(postgres_url, schema) == (int(existing), [])


def _as_url(conninfo: str) -> str:
    """``key=value`` connection string to a ``postgresql://`` URL (the form users type)."""
    p = conninfo_to_dict(conninfo)
    auth = f"{p.get('user', '')}:{p['password']}@" if p.get("password") else ""
    host = f"{p.get('host') or 'localhost'}:{p.get('port') or 5432}"
    return f"postgresql://{auth}{host}/{p['dbname']}"


async def test_export_of_a_real_store_works_and_changes_nothing(
    postgres_url: str, schema: str
) -> None:
    store = await PostgresStore.open(postgres_url, schema=schema)
    try:
        await store.write(ResultBatch(pages=[page(n) for n in range(3)]))
    finally:
        await store.close()
    before = await schema_objects(postgres_url, schema)
    proc = run_crawlq("export", "--store", in_schema(postgres_url, schema))
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["url"] for r in rows] == [page(n).url for n in range(3)]
    assert await schema_objects(postgres_url, schema) == before


async def test_a_read_only_store_reads_an_older_schema_without_migrating_it(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:  # a store made by a crawlq at schema version 1
        patch.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:1])
        await (await PostgresStore.open(postgres_url, schema=schema)).close()
    await query(  # what that crawlq wrote: no WARC columns
        postgres_url,
        sql.SQL(
            "INSERT INTO {}.pages (fingerprint, url, final_url, status, content_type,"
            " depth, fetched_at, size_bytes, elapsed_s, attempt, spider)"
            " VALUES (%s, %s, %s, 200, 'text/html', 0, 1800000001, 10, 0.1, 1, 'd')"
        ).format(sql.Identifier(schema)),
        page(1).fingerprint,
        page(1).url,
        page(1).url,
    )
    store = await open_store(in_schema(postgres_url, schema), read_only=True)
    try:
        [read] = [p async for p in store.pages()]
        assert (read.url, read.warc_file, read.warc_offset) == (page(1).url, None, None)
        assert (await store.counts()).pages == 1
        with pytest.raises(StoreError, match="read-only"):
            await store.write(ResultBatch(pages=[page(2)]))
    finally:
        await store.close()
    version = await query(
        postgres_url, sql.SQL("SELECT value FROM {}.store_meta").format(sql.Identifier(schema))
    )
    assert version == [("1",)]  # not migrated
    columns = await query(
        postgres_url,
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = 'pages' AND column_name LIKE 'warc%%'",
        schema,
    )
    assert columns == []


async def test_status_does_not_create_a_missing_postgres_store(
    redis_url: str, job: str, postgres_url: str, schema: str
) -> None:
    store_url = in_schema(postgres_url, schema)
    settings = Settings(job=job, frontier=redis_url, store=store_url, delay_s=0)
    frontier = await open_frontier(redis_url, job=job, create=True)
    try:
        await bind_job(frontier, settings, create=True)
    finally:
        await frontier.close()
    proc = run_crawlq("status", "--frontier", redis_url, "--job", job, "--json")
    assert json.loads(proc.stdout)["stored"] is None
    assert await schema_objects(postgres_url, schema) == (0, [])


# SQLite: the same flag, for symmetry.


def test_export_of_a_sqlite_file_that_holds_no_store_fails_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x)")
    conn.close()
    before = path.read_bytes()
    proc = run_crawlq("export", "--store", str(path), check=False)
    assert proc.returncode == 1
    assert (
        proc.stderr == f"crawlq: cannot export: no crawlq store in {path} (no store_meta table)\n"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


async def test_a_read_only_sqlite_store_reads_version_1_without_migrating(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = await SqliteStore.open(path)
    try:
        await store.write(ResultBatch(pages=[page(1)]))
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:  # what a crawlq of schema version 1 left
        conn.execute("ALTER TABLE pages DROP COLUMN warc_file")
        conn.execute("ALTER TABLE pages DROP COLUMN warc_offset")
        conn.execute("ALTER TABLE pages DROP COLUMN canonical_url")
        conn.execute("ALTER TABLE pages DROP COLUMN referrer")
        conn.execute("ALTER TABLE dead_letters DROP COLUMN referrer")
        conn.execute("UPDATE store_meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    read_only = await open_store(str(path), read_only=True)
    try:
        [read] = [p async for p in read_only.pages()]
        assert (read.url, read.warc_file) == (page(1).url, None)
        assert [p async for p in read_only.pages(job="docs")] == []  # no job before 6
        with pytest.raises(StoreError, match="read-only"):
            await read_only.write(ResultBatch(pages=[page(2)]))
    finally:
        await read_only.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM store_meta").fetchall() == [("1",)]
    conn.close()
