"""Reading the SQL stores: the four keyset streams and `lookup`, written once for both.

`Queries` builds the read queries of one store from its `crawlq.store.sql.Dialect` and the
schema version of its tables (columns an older schema lacks are read as NULL). `SqlReader` is
the half of `crawlq.store.base.Store` that reads: ``pages``, ``items``, ``dead``,
``filtered`` (keyset streams, `crawlq.store.keyset`) and ``lookup`` (one snapshot). A backend
mixes it in and supplies how to run a query (`SqlReader._fetch`), several in one snapshot
(`SqlReader._snapshot`), how it spells "these fingerprints" and how it decodes item data.

Errors are the backend's (`crawlq.store.base.Store`): `crawlq.errors.StoreUnavailable` when
it cannot be reached or stays locked, `crawlq.errors.StoreError` for any other failure or a
closed store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.store import keyset
from crawlq.store.keyset import BODY_CHUNK_ROWS, CHUNK_ROWS, Keyset, Row
from crawlq.store.outcomes import LOOKUP_MAX, StoredOutcome
from crawlq.store.rows import (
    dead_from_row,
    filtered_from_row,
    item_from_row,
    outcomes_from_rows,
    page_from_row,
)
from crawlq.store.sql import PAGE_COLUMNS, SPIDER_ERROR_SQL, CountQueries, Dialect

__all__ = ["Queries", "SqlReader"]


class Queries:
    """The read queries of one store: its dialect and the schema version it reads.

    Args:
        dialect: The backend's spelling.
        version: The schema version of the store's tables (1..); columns added later are
            read as NULL.
    """

    def __init__(self, dialect: Dialect, version: int) -> None:
        self.dialect = dialect
        self.version = version

    def page_columns(self, *, with_body: bool) -> str:
        """Every page column in `crawlq.store.rows.page_from_row` order."""
        null = self.dialect.null
        body = "body" if with_body else null("bytea")
        v = self.version
        warc = "warc_file, warc_offset" if v >= 2 else f"{null('text')}, {null('bigint')}"
        canonical = "canonical_url" if v >= 3 else null("text")
        referrer = "referrer" if v >= 4 else null("text")
        request = "request" if v >= 5 else null("text")
        return f"{PAGE_COLUMNS}, {body}, {warc}, {canonical}, {referrer}, {request}"

    def counts(self, kind_sql: str, job: str | None) -> CountQueries:
        """The reads of `crawlq.store.base.Store.counts`, for the whole store or ``job``.

        Before version 6 no row has a job, so a job's counts are all 0.
        """
        return CountQueries.of(self.dialect, kind_sql, job, has_job=self.version >= 6)

    def dead_columns(self) -> str:
        """Every dead-letter column in `crawlq.store.rows.dead_from_row` order."""
        referrer = "referrer" if self.version >= 4 else self.dialect.null("text")
        return f"at, fingerprint, url, reason, detail, attempts, depth, {referrer}"

    def pages(
        self,
        *,
        since: float | None,
        with_body: bool,
        spider_errors_only: bool,
        job: str | None = None,
    ) -> Keyset:
        """Pages by ``(fetched_at, fingerprint)`` (`crawlq.store.base.Store.pages`).

        With ``job``, only the pages that job wrote; before version 6 no page has a job, so
        none.
        """
        m = self.dialect.mark
        select = f"SELECT {self.page_columns(with_body=with_body)} FROM pages"
        narrow = [SPIDER_ERROR_SQL] if spider_errors_only else []
        if job is not None:
            narrow.append(f"job = {m}" if self.version >= 6 else "1 = 0")
        fixed: tuple[Any, ...] = (job,) if job is not None and self.version >= 6 else ()
        first = ([f"fetched_at >= {m}"] if since is not None else []) + narrow
        return Keyset(
            first=_where(select, first, f"ORDER BY fetched_at, fingerprint LIMIT {m}"),
            params=(() if since is None else (float(since),)) + fixed,
            later=_where(
                select,
                [f"(fetched_at, fingerprint) > ({m}, {m})", *narrow],
                f"ORDER BY fetched_at, fingerprint LIMIT {m}",
            ),
            key=(7, 0),
            chunk_rows=BODY_CHUNK_ROWS if with_body else CHUNK_ROWS,
            fixed=fixed,
        )

    def items(self, *, since: float | None) -> Keyset:
        """Items by ``(created_at, fingerprint, idx)`` (`crawlq.store.base.Store.items`)."""
        m = self.dialect.mark
        select = "SELECT created_at, fingerprint, idx, url, spider, data FROM items"
        order = f"ORDER BY created_at, fingerprint, idx LIMIT {m}"
        return Keyset(
            first=_where(select, [f"created_at >= {m}"] if since is not None else [], order),
            params=() if since is None else (float(since),),
            later=_where(select, [f"(created_at, fingerprint, idx) > ({m}, {m}, {m})"], order),
            key=(0, 1, 2),
        )

    def dead(self) -> Keyset:
        """Dead letters by ``(at, fingerprint)`` (`crawlq.store.base.Store.dead`)."""
        return self._by_time(f"SELECT {self.dead_columns()} FROM dead_letters")

    def filtered(self) -> Keyset:
        """Filtered URLs by ``(at, fingerprint)`` (`crawlq.store.base.Store.filtered`)."""
        return self._by_time("SELECT at, fingerprint, url, reason, depth FROM filtered")

    def _by_time(self, select: str) -> Keyset:
        m = self.dialect.mark
        order = f"ORDER BY at, fingerprint LIMIT {m}"
        later = _where(select, [f"(at, fingerprint) > ({m}, {m})"], order)
        return Keyset(first=f"{select} {order}", params=(), later=later, key=(0, 1))

    def lookup(self, where: str) -> tuple[str, str, str, str]:
        """The four reads of `crawlq.store.base.Store.lookup`, each narrowed by ``where``.

        Pages (no body), ``(fingerprint, count)`` of items, dead letters, filtered records:
        the rows `crawlq.store.rows.outcomes_from_rows` takes.
        """
        return (
            f"SELECT {self.page_columns(with_body=False)} FROM pages {where}",
            f"SELECT fingerprint, count(*) FROM items {where} GROUP BY fingerprint",
            f"SELECT {self.dead_columns()} FROM dead_letters {where}",
            f"SELECT at, fingerprint, url, reason, depth FROM filtered {where}",
        )


def _where(select: str, conditions: Sequence[str], order: str) -> str:
    if not conditions:
        return f"{select} {order}"
    return f"{select} WHERE {' AND '.join(conditions)} {order}"


class SqlReader:
    """The reads of `crawlq.store.base.Store` on a SQL backend; see there for their semantics.

    A subclass sets ``_queries`` and implements the four hooks below.
    """

    _queries: Queries

    async def pages(
        self,
        *,
        since: float | None = None,
        with_body: bool = False,
        spider_errors_only: bool = False,
        job: str | None = None,
    ) -> AsyncIterator[PageRecord]:
        """Stream pages by ``(fetched_at, fingerprint)``; see `crawlq.store.Store.pages`."""
        read = self._queries.pages(
            since=since, with_body=with_body, spider_errors_only=spider_errors_only, job=job
        )
        async for row in keyset.stream(self._fetch, read):
            yield page_from_row(row)

    async def items(self, *, since: float | None = None) -> AsyncIterator[ItemRecord]:
        """Stream items by ``(created_at, fingerprint, index)``; see `crawlq.store.Store.items`."""
        async for row in keyset.stream(self._fetch, self._queries.items(since=since)):
            yield item_from_row(row, self._item_data(row[5]))

    async def dead(self) -> AsyncIterator[DeadRecord]:
        """Stream dead letters by ``(at, fingerprint)``; see `crawlq.store.Store.dead`."""
        async for row in keyset.stream(self._fetch, self._queries.dead()):
            yield dead_from_row(row)

    async def filtered(self) -> AsyncIterator[FilteredRecord]:
        """Stream filtered URLs by ``(at, fingerprint)``; see `crawlq.store.Store.filtered`."""
        async for row in keyset.stream(self._fetch, self._queries.filtered()):
            yield filtered_from_row(row)

    async def lookup(self, fingerprints: Sequence[bytes]) -> dict[bytes, StoredOutcome]:
        """What the store holds for each fingerprint, in one snapshot (`Store.lookup`).

        Raises:
            ValueError: More than `LOOKUP_MAX` fingerprints.
        """
        fps = list(dict.fromkeys(bytes(fp) for fp in fingerprints))
        if len(fps) > LOOKUP_MAX:
            raise ValueError(f"lookup takes at most {LOOKUP_MAX} fingerprints, got {len(fps)}")
        if not fps:
            return {}
        where, params = self._fingerprints_in(fps)
        queries = self._queries.lookup(where)
        pages, items, dead, filtered = await self._snapshot(queries, params)
        return outcomes_from_rows(pages, items, dead, filtered)

    # The backend's part.

    async def _fetch(self, query: str, params: tuple[Any, ...]) -> list[Row]:
        """Every row of one short query (one chunk of a keyset stream)."""
        raise NotImplementedError

    async def _snapshot(self, queries: Sequence[str], params: tuple[Any, ...]) -> list[list[Row]]:
        """The rows of each query, all read in one snapshot."""
        raise NotImplementedError

    def _fingerprints_in(self, fingerprints: list[bytes]) -> tuple[str, tuple[Any, ...]]:
        """A ``WHERE`` clause selecting ``fingerprint`` among ``fingerprints``, and its params."""
        raise NotImplementedError

    def _item_data(self, stored: Any) -> dict[str, Any]:
        """An item's data as the backend returns its ``data`` column."""
        raise NotImplementedError
