"""Keyset streaming, shared by the SQL stores: a table read in key order, one short query a chunk.

A `Keyset` is a read written once per kind of record (`crawlq.store.reads.Queries`): the query
of the first chunk, the query of every later chunk (the rows after the key of the last row
read: ``WHERE (k1, k2) > (?, ?)``), which columns of a row make its key, and the chunk size.
Both queries end with ``ORDER BY <key> LIMIT <mark>``; `stream` binds the chunk size last
(after the key and any `Keyset.fixed` parameters).

`stream` runs them through the backend's ``fetch(query, params) -> rows``, which holds a
connection (SQLite: the store thread; PostgreSQL: a pooled connection) only while one chunk is
read, so nothing stays open between chunks and a consumer that stops early leaves nothing
behind. The stream is not a snapshot (`crawlq.store.base.Store.pages`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["BODY_CHUNK_ROWS", "CHUNK_ROWS", "Fetch", "Keyset", "Row", "stream"]

Row = tuple[Any, ...]
Fetch = Callable[[str, tuple[Any, ...]], Awaitable[list[Row]]]
"""A backend's read: ``fetch(query, params)`` returns every row of one short query."""

CHUNK_ROWS = 1000
"""Rows per query when streaming."""
BODY_CHUNK_ROWS = 16
"""Rows per query when pages are streamed with their bodies (up to ``max_body_bytes`` each)."""


@dataclass(frozen=True, slots=True)
class Keyset:
    """One keyset-paginated read.

    Attributes:
        first: The first chunk's query; its parameters are ``params`` and then the chunk size.
        params: Parameters of ``first`` before the chunk size (a ``since`` bound, or none).
        later: Every later chunk's query; its parameters are the last row's key, then the
            chunk size.
        key: Positions in a row of the key columns, in ``later``'s order.
        chunk_rows: Rows per query.
        fixed: Parameters of ``later`` after the key and before the chunk size (a job name
            the read is narrowed to, or none); ``params`` ends with them too.
    """

    first: str
    params: tuple[Any, ...]
    later: str
    key: tuple[int, ...]
    chunk_rows: int = CHUNK_ROWS
    fixed: tuple[Any, ...] = ()


async def stream(fetch: Fetch, keyset: Keyset) -> AsyncIterator[Row]:
    """Yield the rows of ``keyset`` chunk by chunk, in key order, until a chunk is short."""
    query, params = keyset.first, keyset.params
    while True:
        rows = await fetch(query, (*params, keyset.chunk_rows))
        for row in rows:
            yield row
        if len(rows) < keyset.chunk_rows:
            return
        last = rows[-1]
        query, params = keyset.later, (*(last[i] for i in keyset.key), *keyset.fixed)
