"""The `store` fixture: every contract test runs once per backend.

Adding a backend is one more entry in ``_OPENERS``. PostgreSQL runs against
``$CRAWLQ_TEST_POSTGRES_URL`` (the `postgres_url` fixture: skipped with a reason locally, a
failure under ``CI=true`` when the server is missing), each test in a schema of its own that is
dropped afterwards.
"""

from __future__ import annotations

import contextlib
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
