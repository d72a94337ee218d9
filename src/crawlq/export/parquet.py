"""Export what a `Store` holds as an Apache Parquet file, streaming (needs the ``parquet`` extra).

The only module that imports pyarrow (``pip install 'crawlq[parquet]'``). Records are read
from the store in its order and written as record batches of `BATCH_ROWS` rows (fewer when
pages carry bodies), so memory stays bounded whatever the size of the crawl.

Columns, by ``what`` (times as ``timestamp[us, UTC]``, fingerprints as lower-case hex):

* ``pages``: url, final_url, status (int32), content_type, depth (int32), title, fetched_at,
  size (int64 bytes), elapsed_s (float64), attempt (int32), error, spider, fingerprint,
  warc_file, warc_offset (int64), canonical_url, referrer, then ``body`` (binary) only when
  bodies are asked for.
* ``items``: url, spider, created_at, fingerprint, index (int32), data: the item as a JSON
  object in a string column (items have no fixed columns; read it with e.g. DuckDB's
  ``json_extract`` or ``pandas.json_normalize``). With a declared item type (``item_fields``):
  crawlq_url, crawlq_spider, crawlq_created_at, crawlq_fingerprint, crawlq_index, then one
  typed column per field (`crawlq.items.schema.ARROW_TYPES`), the stored JSON turned back
  into the field's type (`crawlq.items.schema.field_cells`: ISO text to a timestamp or
  date, base64 to binary); an item whose value does not fit its field, that lacks a field
  that is not Optional, or that holds none of the fields, is left out with a warning naming
  the field (`typed_schema`).
* ``dead``: url, reason, detail, attempts (int32), depth (int32), at, fingerprint, referrer.
* ``filtered``: url, reason, depth (int32), at, fingerprint.
* ``errors``: url, final_url, status (int32), error_type, error, callback, spider,
  fetched_at, fingerprint, replayable (bool), warc_file, warc_offset (int64).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from crawlq.export.filters import RecordFilter, kept
from crawlq.export.rows import (
    BodyReader,
    at_since,
    dead_row,
    error_row,
    filtered_row,
    mapped,
    page_row,
    with_bodies,
)
from crawlq.items.schema import (
    PARQUET_KEY_COLUMNS,
    ItemField,
    WrongType,
    field_cells,
    json_text,
)
from crawlq.records import ItemRecord, PageRecord
from crawlq.secrecy import create_private
from crawlq.store.contract import Store

__all__ = ["BATCH_ROWS", "export_parquet", "schema_of"]

BATCH_ROWS = 1000
"""Rows per record batch (and at most per row group)."""
_BODY_BATCH_ROWS = 64
"""Rows per batch when pages carry their bodies (up to ``max_body_bytes`` each)."""

_TIME = pa.timestamp("us", tz="UTC")
_PAGES = pa.schema(
    [
        ("url", pa.string()),
        ("final_url", pa.string()),
        ("status", pa.int32()),
        ("content_type", pa.string()),
        ("depth", pa.int32()),
        ("title", pa.string()),
        ("fetched_at", _TIME),
        ("size", pa.int64()),
        ("elapsed_s", pa.float64()),
        ("attempt", pa.int32()),
        ("error", pa.string()),
        ("spider", pa.string()),
        ("fingerprint", pa.string()),
        ("warc_file", pa.string()),
        ("warc_offset", pa.int64()),
        ("canonical_url", pa.string()),
        ("referrer", pa.string()),
    ]
)
_ITEMS = pa.schema(
    [
        ("url", pa.string()),
        ("spider", pa.string()),
        ("created_at", _TIME),
        ("fingerprint", pa.string()),
        ("index", pa.int32()),
        ("data", pa.string()),
    ]
)
_DEAD = pa.schema(
    [
        ("url", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("attempts", pa.int32()),
        ("depth", pa.int32()),
        ("at", _TIME),
        ("fingerprint", pa.string()),
        ("referrer", pa.string()),
    ]
)
_FILTERED = pa.schema(
    [
        ("url", pa.string()),
        ("reason", pa.string()),
        ("depth", pa.int32()),
        ("at", _TIME),
        ("fingerprint", pa.string()),
    ]
)

_ERRORS = pa.schema(
    [
        ("url", pa.string()),
        ("final_url", pa.string()),
        ("status", pa.int32()),
        ("error_type", pa.string()),
        ("error", pa.string()),
        ("callback", pa.string()),
        ("spider", pa.string()),
        ("fetched_at", _TIME),
        ("fingerprint", pa.string()),
        ("replayable", pa.bool_()),
        ("warc_file", pa.string()),
        ("warc_offset", pa.int64()),
    ]
)

What = Literal["pages", "items", "dead", "filtered", "errors"]

logger = logging.getLogger("crawlq.export")

_ARROW = {
    "text": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "timestamp": _TIME,
    "date": pa.date32(),
    "decimal": pa.string(),
    "bytes": pa.binary(),
    "json": pa.string(),
}


def typed_schema(fields: Sequence[ItemField]) -> pa.Schema:
    """The Arrow schema of a typed items export: the key columns, then one per field.

    Raises:
        ValueError: A field is named as a key column (``crawlq_url`` ...).
    """
    taken = [f.name for f in fields if f.name in PARQUET_KEY_COLUMNS]
    if taken:
        raise ValueError(f"item field {taken[0]!r} is one of the export's own columns")
    keys = [pa.string(), pa.string(), _TIME, pa.string(), pa.int32()]
    columns = list(zip(PARQUET_KEY_COLUMNS, keys, strict=True))
    return pa.schema(columns + [(f.name, _ARROW[f.kind]) for f in fields])


def schema_of(what: What, *, with_body: bool = False) -> pa.Schema:
    """The Arrow schema of an export of ``what`` (see the module docstring).

    Raises:
        ValueError: ``what`` is not pages, items, dead or filtered.
    """
    if what == "pages":
        return _PAGES.append(pa.field("body", pa.binary())) if with_body else _PAGES
    schemas = {"items": _ITEMS, "dead": _DEAD, "filtered": _FILTERED, "errors": _ERRORS}
    if what not in schemas:
        raise ValueError(
            f"unknown export kind {what!r}: use pages, items, dead, filtered or errors"
        )
    return schemas[what]


async def export_parquet(
    store: Store,
    what: What,
    path: str | os.PathLike[str],
    *,
    since: float | None = None,
    with_body: bool = False,
    spider_errors_only: bool = False,
    where: RecordFilter | None = None,
    item_fields: Sequence[ItemField] | None = None,
    bodies: BodyReader | None = None,
) -> int:
    """Write every record of one kind from ``store`` to the Parquet file ``path``, streaming.

    Args:
        store: The store to read.
        what: Which records: ``pages``, ``items``, ``dead``, ``filtered`` or ``errors``.
        path: The file to write: created with mode ``0600`` (owner only; a stricter umask
            wins: `crawlq.secrecy.create_private`, as stores and WARC files are), or
            replaced if it exists, keeping its mode.
        since: Only records from this Unix time on, in seconds (as `crawlq.export.export`).
        with_body: Pages only: add each page's stored body as the ``body`` column.
        spider_errors_only: Pages only: just those with a spider error.
        where: Only the records it keeps (`crawlq.export.filters.RecordFilter`).
        item_fields: Items only: the declared item type's fields
            (`crawlq.items.schema.item_fields`), one typed column each.
        bodies: With ``with_body``: reads the bodies of the pages stored without one from
            their WARC records (as `crawlq.export.export`).

    Returns:
        The number of records written.

    Raises:
        ValueError: ``what`` is not one of the values above, or a field takes the name of
            a key column.
        StoreError: Reading the store failed; the file is then incomplete.
        OSError: The file cannot be written.
    """
    schema = schema_of(what, with_body=with_body)
    if what == "items" and item_fields:
        schema = typed_schema(item_fields)
    if where is not None:
        where.check(what)
    rows: AsyncIterator[dict[str, Any]]
    if what == "pages":
        body = with_body
        pages = store.pages(since=since, with_body=with_body, spider_errors_only=spider_errors_only)
        rows = mapped(with_bodies(kept(pages, where), bodies), lambda p: _page(p, body))
    elif what == "errors":
        failed = store.pages(since=since, with_body=True, spider_errors_only=True)
        rows = mapped(kept(failed, where), lambda p: error_row(p, time=_time))
    elif what == "items" and item_fields:
        rows = _typed_items(kept(store.items(since=since), where), tuple(item_fields))
    elif what == "items":
        rows = mapped(kept(store.items(since=since), where), _item)
    elif what == "dead":
        dead = kept(at_since(store.dead(), since), where)
        rows = mapped(dead, lambda d: dead_row(d, time=_time))
    else:
        filtered = kept(at_since(store.filtered(), since), where)
        rows = mapped(filtered, lambda f: filtered_row(f, time=_time))
    batch_rows = BATCH_ROWS
    if (with_body and what == "pages") or what == "errors":
        batch_rows = _BODY_BATCH_ROWS
    written = 0
    create_private(path)  # Arrow would create it by the umask alone (0644)
    with pq.ParquetWriter(os.fspath(path), schema) as writer:
        pending: list[dict[str, Any]] = []
        async for row in rows:
            pending.append(row)
            if len(pending) == batch_rows:
                writer.write_batch(pa.RecordBatch.from_pylist(pending, schema=schema))
                written += len(pending)
                pending = []
        if pending:
            writer.write_batch(pa.RecordBatch.from_pylist(pending, schema=schema))
            written += len(pending)
    return written


def _time(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _page(page: PageRecord, with_body: bool) -> dict[str, Any]:
    row = page_row(page, time=_time)
    if with_body:
        row["body"] = page.body
    return row


def _item(item: ItemRecord) -> dict[str, Any]:
    return {
        "url": item.url,
        "spider": item.spider,
        "created_at": _time(item.created_at),
        "fingerprint": item.fingerprint.hex(),
        "index": item.index,
        "data": json.dumps(item.data, ensure_ascii=False),
    }


async def _typed_items(
    items: AsyncIterator[ItemRecord], fields: tuple[ItemField, ...]
) -> AsyncIterator[dict[str, Any]]:
    async for item in items:
        row: dict[str, Any] = dict(
            zip(
                PARQUET_KEY_COLUMNS,
                (item.url, item.spider, _time(item.created_at), item.fingerprint.hex(), item.index),
                strict=True,
            )
        )
        try:
            cells = field_cells(fields, item.data)
        except WrongType as exc:
            logger.warning(
                "typed Parquet export: item %d of %s left out (%s)", item.index, item.url, exc
            )
            continue
        for f, value in zip(fields, cells, strict=True):
            if f.kind in ("json", "decimal") and value is not None:
                value = json_text(value) if f.kind == "json" else str(value)
            row[f.name] = value
        yield row
