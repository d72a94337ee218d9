"""The `store` fixture: every contract test runs once per backend.

Adding a backend is one more entry in ``_OPENERS`` (a PostgreSQL one would read
``CRAWLQ_TEST_PG_URL``, create a schema per test, skip with a reason locally and fail under
``CI=true`` when the server is missing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from crawlq.store import Store
from crawlq.store.sqlite import SqliteStore


async def _open_sqlite(tmp_path: Path) -> Store:
    return await SqliteStore.open(tmp_path / "crawlq.db")


_OPENERS: dict[str, Callable[[Path], Awaitable[Store]]] = {
    "sqlite": _open_sqlite,
}


@pytest.fixture(params=sorted(_OPENERS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await _OPENERS[request.param](tmp_path)
    try:
        yield opened
    finally:
        await opened.close()
