"""Reading the SQL stores, written once for both: keyset streams, row layouts, counts, lookups.

`Queries` builds the read queries of one store from its `crawlq.store.sql.Dialect` and the
schema version of its tables (columns an older schema lacks are read as NULL). `SqlReader`
is the half of `crawlq.store.Store` that reads: ``pages``, ``items``, ``dead``, ``filtered``
(keyset streams) and ``lookup`` (one snapshot). A backend subclasses it and supplies how to
run a query (`SqlReader._fetch`), several in one snapshot (`SqlReader._snapshot`), how it
spells "these fingerprints" and how it decodes item data; it runs ``Store.counts`` itself,
in one snapshot, from `CountQueries` (rows turned into a count by `store_counts`).

Keyset streaming: a `Keyset` is a read written once per kind of record: the query of the
first chunk, the query of every later chunk (the rows after the key of the last row read:
``WHERE (k1, k2) > (?, ?)``), which columns of a row make its key, and the chunk size. Both
queries end with ``ORDER BY <key> LIMIT <mark>``; `stream` binds the chunk size last (after
the key and any `Keyset.fixed` parameters). `stream` runs them through the backend's
``fetch(query, params) -> rows``, which holds a connection (SQLite: the store thread;
PostgreSQL: a pooled connection) only while one chunk is read, so nothing stays open between
chunks and a consumer that stops early leaves nothing behind. The stream is not a snapshot
(`crawlq.store.Store.pages`).

Row layouts: each read selects its columns in the order the ``*_from_row`` functions take
them: pages in `crawlq.records.PageRecord` field order (``fingerprint`` … ``request``), items
as ``(created_at, fingerprint, idx, url, spider, data)``, dead letters as ``(at, fingerprint,
url, reason, detail, attempts, depth, referrer)``, filtered URLs as ``(at, fingerprint, url,
reason, depth)``: the time first, the order streams are read in. Spider errors are counted
per kind, the exception class name (`crawlq.records.spider_error_type`).

Errors are the backend's (`crawlq.store.Store`): `crawlq.errors.StoreUnavailable` when it
cannot be reached or stays locked, `crawlq.errors.StoreError` for any other failure or a
closed store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from crawlq.records import (
    SPIDER_ERROR_PREFIX,
    DeadRecord,
    FilteredRecord,
    ItemRecord,
    PageRecord,
    spider_error_type,
)
from crawlq.store.contract import LOOKUP_MAX, StoreCounts, StoredOutcome
from crawlq.store.sql import PAGE_COLUMNS, SPIDER_ERROR_SQL, Dialect

__all__ = [
    "BODY_CHUNK_ROWS",
    "CHUNK_ROWS",
    "CountQueries",
    "Fetch",
    "Keyset",
    "Queries",
    "Row",
    "SqlReader",
    "Statement",
    "dead_from_row",
    "filtered_from_row",
    "item_from_row",
    "outcomes_from_rows",
    "page_from_row",
    "spider_error_counts",
    "store_counts",
    "stream",
]

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


def page_from_row(row: Sequence[Any]) -> PageRecord:
    """A page from a row of its fields in declaration order (fingerprint … request)."""
    return PageRecord(*row)


def item_from_row(row: Sequence[Any], data: dict[str, Any]) -> ItemRecord:
    """An item from ``(created_at, fingerprint, idx, url, spider, …)`` and its decoded data."""
    return ItemRecord(row[1], row[2], row[3], row[4], data, row[0])


def dead_from_row(row: Sequence[Any]) -> DeadRecord:
    """A dead letter from ``(at, fingerprint, url, reason, detail, attempts, depth, referrer)``."""
    return DeadRecord(row[1], row[2], row[3], row[4], row[5], row[6], row[0], row[7])


def filtered_from_row(row: Sequence[Any]) -> FilteredRecord:
    """A filtered URL from ``(at, fingerprint, url, reason, depth)``."""
    return FilteredRecord(row[1], row[2], row[3], row[4], row[0])


def outcomes_from_rows(
    pages: Sequence[Sequence[Any]],
    items: Sequence[Sequence[Any]],
    dead: Sequence[Sequence[Any]],
    filtered: Sequence[Sequence[Any]],
) -> dict[bytes, StoredOutcome]:
    """``Store.lookup``'s answer from the SQL backends' rows.

    Pages as `page_from_row` (body None), ``(fingerprint, count)`` of items, dead letters as
    `dead_from_row`, filtered records as `filtered_from_row`.
    """
    counts = {bytes(fp): int(n) for fp, n in items}
    out: dict[bytes, StoredOutcome] = {}
    for row in pages:
        page = page_from_row(row)
        fp = bytes(page.fingerprint)
        out[fp] = StoredOutcome(page=page, items=counts.get(fp, 0))
    for row in dead:
        record = dead_from_row(row)
        out.setdefault(bytes(record.fingerprint), StoredOutcome(dead=record))
    for row in filtered:
        f = filtered_from_row(row)
        out.setdefault(bytes(f.fingerprint), StoredOutcome(filtered=f))
    return out


def spider_error_counts(rows: Sequence[Sequence[Any]]) -> dict[str, int]:
    """Spider-error pages per kind, from ``(text after the prefix up to ':', count)`` rows.

    The SQL stores group by that text; `crawlq.records.spider_error_type` turns each into the
    kind (older forms included), and counts of one kind are added up.
    """
    counts: dict[str, int] = {}
    for token, n in rows:
        kind = spider_error_type(f"{SPIDER_ERROR_PREFIX}{token or ''}:") or "SpiderError"
        counts[kind] = counts.get(kind, 0) + int(n)
    return counts


Statement = tuple[str, tuple[Any, ...]]
"""One SQL statement and its parameters."""


@dataclass(frozen=True, slots=True)
class CountQueries:
    """The reads of ``Store.counts``, for the whole store or one job, run in one snapshot.

    Build with `CountQueries.of`; `store_counts` turns their rows into a `StoreCounts`.

    Attributes:
        totals: One row: pages, items, dead letters, filtered URLs.
        groups: Pages per status, dead letters per reason, filtered URLs per reason.
        spider_errors: Spider-error pages per kind text (the text between the prefix and the
            next ``:``), the rows `spider_error_counts` takes.
    """

    totals: Statement
    groups: tuple[Statement, Statement, Statement]
    spider_errors: Statement

    @classmethod
    def of(
        cls, d: Dialect, kind_sql: str, job: str | None, *, has_job: bool = True
    ) -> CountQueries:
        """The count reads spelled for ``d``.

        Args:
            d: The backend's spelling.
            kind_sql: The backend's SQL expression of a spider-error page's kind text.
            job: Count only what this job wrote: its pages, dead letters and filtered
                records (the ``job`` column), and the items of its pages and dead letters.
                None: the whole
                store, rows of every job and of none.
            has_job: Whether the tables have the ``job`` column (store schema 6 on). Without
                it no row belongs to a job, so a job's counts are all 0.
        """
        params: tuple[Any, ...] = ()
        if job is None:
            cond = ""
        elif has_job:
            cond, params = f"job = {d.mark}", (job,)
        else:
            cond = "1 = 0"
        where = f" WHERE {cond}" if cond else ""
        items = (
            f" WHERE fingerprint IN (SELECT fingerprint FROM pages{where}"
            f" UNION SELECT fingerprint FROM dead_letters{where})"
            if cond
            else ""
        )
        totals = (
            f"SELECT (SELECT count(*) FROM pages{where}), (SELECT count(*) FROM items{items}),"
            f" (SELECT count(*) FROM dead_letters{where}), (SELECT count(*) FROM filtered{where})"
        )
        errors = f"{SPIDER_ERROR_SQL} AND {cond}" if cond else SPIDER_ERROR_SQL
        return cls(
            totals=(totals, params * 5),
            groups=(
                (f"SELECT status, count(*) FROM pages{where} GROUP BY status", params),
                (f"SELECT reason, count(*) FROM dead_letters{where} GROUP BY reason", params),
                (f"SELECT reason, count(*) FROM filtered{where} GROUP BY reason", params),
            ),
            spider_errors=(
                f"SELECT {kind_sql}, count(*) FROM pages WHERE {errors} GROUP BY 1",
                params,
            ),
        )


def store_counts(
    totals: Sequence[Any],
    groups: Sequence[Sequence[Sequence[Any]]],
    spider_errors: Sequence[Sequence[Any]],
) -> StoreCounts:
    """`crawlq.store.StoreCounts` from the rows of the count queries.

    ``totals`` is the row of `CountQueries.totals`, ``groups`` the rows of each of
    `CountQueries.groups`, ``spider_errors`` the rows of `CountQueries.spider_errors`.
    """
    by_status, by_dead, by_filtered = ({row[0]: int(row[1]) for row in rows} for rows in groups)
    return StoreCounts(
        pages=totals[0],
        items=totals[1],
        dead=totals[2],
        filtered=totals[3],
        pages_by_status=by_status,
        dead_by_reason=by_dead,
        filtered_by_reason=by_filtered,
        spider_errors_by_type=spider_error_counts(spider_errors),
    )


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
        """Every page column in `page_from_row` order."""
        null = self.dialect.null
        body = "body" if with_body else null("bytea")
        v = self.version
        warc = "warc_file, warc_offset" if v >= 2 else f"{null('text')}, {null('bigint')}"
        canonical = "canonical_url" if v >= 3 else null("text")
        referrer = "referrer" if v >= 4 else null("text")
        request = "request" if v >= 5 else null("text")
        return f"{PAGE_COLUMNS}, {body}, {warc}, {canonical}, {referrer}, {request}"

    def counts(self, kind_sql: str, job: str | None) -> CountQueries:
        """The reads of `crawlq.store.Store.counts`, for the whole store or ``job``.

        Before version 6 no row has a job, so a job's counts are all 0.
        """
        return CountQueries.of(self.dialect, kind_sql, job, has_job=self.version >= 6)

    def dead_columns(self) -> str:
        """Every dead-letter column in `dead_from_row` order."""
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
        """Pages by ``(fetched_at, fingerprint)`` (`crawlq.store.Store.pages`).

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
        """Items by ``(created_at, fingerprint, idx)`` (`crawlq.store.Store.items`)."""
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
        """Dead letters by ``(at, fingerprint)`` (`crawlq.store.Store.dead`)."""
        return self._by_time(f"SELECT {self.dead_columns()} FROM dead_letters")

    def filtered(self) -> Keyset:
        """Filtered URLs by ``(at, fingerprint)`` (`crawlq.store.Store.filtered`)."""
        return self._by_time("SELECT at, fingerprint, url, reason, depth FROM filtered")

    def _by_time(self, select: str) -> Keyset:
        m = self.dialect.mark
        order = f"ORDER BY at, fingerprint LIMIT {m}"
        later = _where(select, [f"(at, fingerprint) > ({m}, {m})"], order)
        return Keyset(first=f"{select} {order}", params=(), later=later, key=(0, 1))

    def lookup(self, where: str) -> tuple[str, str, str, str]:
        """The four reads of `crawlq.store.Store.lookup`, each narrowed by ``where``.

        Pages (no body), ``(fingerprint, count)`` of items, dead letters, filtered records:
        the rows `outcomes_from_rows` takes.
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
    """The reads of `crawlq.store.Store` on a SQL backend; see there for their semantics.

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
        async for row in stream(self._fetch, read):
            yield page_from_row(row)

    async def items(self, *, since: float | None = None) -> AsyncIterator[ItemRecord]:
        """Stream items by ``(created_at, fingerprint, index)``; see `crawlq.store.Store.items`."""
        async for row in stream(self._fetch, self._queries.items(since=since)):
            yield item_from_row(row, self._item_data(row[5]))

    async def dead(self) -> AsyncIterator[DeadRecord]:
        """Stream dead letters by ``(at, fingerprint)``; see `crawlq.store.Store.dead`."""
        async for row in stream(self._fetch, self._queries.dead()):
            yield dead_from_row(row)

    async def filtered(self) -> AsyncIterator[FilteredRecord]:
        """Stream filtered URLs by ``(at, fingerprint)``; see `crawlq.store.Store.filtered`."""
        async for row in stream(self._fetch, self._queries.filtered()):
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
