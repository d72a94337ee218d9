"""The `store` fixture: every contract test runs once per backend.

Adding a backend is one more entry in ``_OPENERS``. PostgreSQL runs against
``$CRAWLQ_TEST_POSTGRES_URL`` (the `postgres_url` fixture: skipped with a reason locally, a
failure under ``CI=true`` when the server is missing), each test in a schema of its own that is
dropped afterwards.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from crawlq.store import Store
from crawlq.store.sqlite import SqliteStore
from tests.conftest import pg_schema


@contextlib.asynccontextmanager
async def _open_sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    store = await SqliteStore.open(tmp_path / "crawlq.db")
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def _open_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    from crawlq.store.postgres import PostgresStore

    url = request.getfixturevalue("postgres_url")
    async with pg_schema(url) as schema:
        store = await PostgresStore.open(url, schema=schema)
        try:
            yield store
        finally:
            await store.close()


_OPENERS: dict[str, Callable[[pytest.FixtureRequest, Path], AbstractAsyncContextManager[Store]]] = {
    "sqlite": _open_sqlite,
    "postgres": _open_postgres,
}


@pytest.fixture(params=sorted(_OPENERS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with _OPENERS[request.param](request, tmp_path) as opened:
        yield opened


@pytest.fixture
async def schema(postgres_url: str) -> AsyncIterator[str]:
    """A PostgreSQL schema name of this test's own, dropped afterwards."""
    async with pg_schema(postgres_url) as name:
        yield name


_SQLITE_UNDO: dict[int, tuple[str, ...]] = {
    6: (
        "DROP INDEX pages_job",
        "DROP INDEX dead_letters_job",
        "DROP INDEX filtered_job",
        "ALTER TABLE pages DROP COLUMN job",
        "ALTER TABLE dead_letters DROP COLUMN job",
        "ALTER TABLE filtered DROP COLUMN job",
    ),
    5: ("DROP INDEX pages_spider_errors", "ALTER TABLE pages DROP COLUMN request"),
    4: ("ALTER TABLE pages DROP COLUMN referrer", "ALTER TABLE dead_letters DROP COLUMN referrer"),
    3: ("ALTER TABLE pages DROP COLUMN canonical_url",),
    2: ("ALTER TABLE pages DROP COLUMN warc_file", "ALTER TABLE pages DROP COLUMN warc_offset"),
}
"""``_SQLITE_UNDO[v]`` takes a store file from schema version ``v`` back to ``v - 1``."""


def sqlite_store_at_version(path: Path, version: int) -> None:
    """Make the store file at ``path`` (closed, at the latest schema) what a crawlq of schema
    ``version`` would have left: the later steps' columns and indexes dropped."""
    from crawlq.store.sqlite.schema import SCHEMA_VERSION

    with sqlite3.connect(path) as db:
        for step in range(SCHEMA_VERSION, version, -1):
            for statement in _SQLITE_UNDO[step]:
                db.execute(statement)
        db.execute("UPDATE store_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    db.close()
