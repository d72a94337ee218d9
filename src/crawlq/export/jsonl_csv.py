"""Export what a `Store` holds as JSON Lines or CSV, streaming (Parquet: `crawlq.export.parquet`).

Rows come from `crawlq.export.rows`; CSV cells are written by `crawlq.export.cells` (formula
injection guard included).

JSON Lines: one JSON object per line, UTF-8 characters unescaped. CSV (RFC 4180 via the `csv`
module, CRLF line ends; open files with ``newline=""``): one header row, then one row per
record. None is an empty cell, strings are written as they are, and any other value as JSON
(``true``, ``1.5``, ``[1, 2]``). Item columns are the union of the keys of the first 1000
items, in first-seen order, then ``_url``, ``_spider`` and ``_extra``: a JSON object holding a
later item's keys that have no column (empty when there are none).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, TextIO

from crawlq.export.cells import CsvWriter, cell_texts, json_text
from crawlq.export.rows import (
    BODY_COLUMN,
    DEAD_COLUMNS,
    ERROR_COLUMNS,
    FILTERED_COLUMNS,
    PAGE_COLUMNS,
    at_since,
    dead_row,
    error_row,
    filtered_row,
    mapped,
    page_row,
    page_row_with_body,
)
from crawlq.records import ItemRecord
from crawlq.store.base import Store

__all__ = ["export"]

_ITEM_SAMPLE = 1000
"""Items read before the CSV header is fixed."""
_ITEM_META = ("_url", "_spider")
_EXTRA = "_extra"


async def export(
    store: Store,
    what: Literal["pages", "items", "dead", "filtered", "errors"],
    fmt: Literal["jsonl", "csv"],
    out: TextIO,
    *,
    since: float | None = None,
    with_body: bool = False,
    escape_formulas: bool = True,
    spider_errors_only: bool = False,
) -> int:
    """Write every record of one kind from ``store`` to ``out``, streaming.

    Records come in the store's order (by time; see `crawlq.store.Store`) and are written as
    they arrive, so memory stays bounded whatever the size of the crawl. The row shapes are in
    the module docstring.

    Args:
        store: The store to read.
        what: Which records: ``pages``, ``items``, ``dead``, ``filtered`` or ``errors``
            (pages with a spider error, as `error_row`).
        fmt: ``jsonl`` (JSON Lines) or ``csv``.
        out: A text stream open for writing (UTF-8; for CSV files, ``newline=""``).
        since: Only records from this Unix time on, in seconds (``fetched_at`` of pages,
            ``created_at`` of items, ``at`` of dead and filtered records); None: all.
        with_body: Pages only: add each page's stored body as ``body_b64``.
        escape_formulas: CSV only: prefix with ``'`` the text cells a spreadsheet would
            evaluate as a formula (see the module docstring); False writes them raw.
        spider_errors_only: Pages only: just those with a spider error.

    Returns:
        The number of records written (the CSV header not counted).

    Raises:
        ValueError: ``what`` or ``fmt`` is not one of the values above.
        StoreError: Reading the store failed (see `crawlq.store.Store`); rows already written
            stay in ``out``.
    """
    if fmt not in ("jsonl", "csv"):
        raise ValueError(f"unknown export format {fmt!r}: use jsonl or csv")
    if what == "items":
        return await _export_items(store.items(since=since), fmt, out, escape_formulas)
    columns: tuple[str, ...]
    rows: AsyncIterator[dict[str, Any]]
    if what == "pages":
        columns = (*PAGE_COLUMNS, BODY_COLUMN) if with_body else PAGE_COLUMNS
        to_row = page_row_with_body if with_body else page_row
        pages = store.pages(since=since, with_body=with_body, spider_errors_only=spider_errors_only)
        rows = mapped(pages, to_row)
    elif what == "errors":
        columns = ERROR_COLUMNS
        failed = store.pages(since=since, with_body=True, spider_errors_only=True)
        rows = mapped(failed, error_row)
    elif what == "dead":
        columns, rows = DEAD_COLUMNS, mapped(at_since(store.dead(), since), dead_row)
    elif what == "filtered":
        rows = mapped(at_since(store.filtered(), since), filtered_row)
        columns = FILTERED_COLUMNS
    else:
        raise ValueError(
            f"unknown export kind {what!r}: use pages, items, dead, filtered or errors"
        )

    written = 0
    if fmt == "jsonl":
        async for row in rows:
            _write_json(out, row)
            written += 1
        return written
    writer = CsvWriter(out, escape_formulas)
    writer.writerow(columns)
    async for row in rows:
        writer.writerow(cell_texts(row[c] for c in columns))
        written += 1
    return written


async def _export_items(
    items: AsyncIterator[ItemRecord], fmt: str, out: TextIO, escape_formulas: bool = True
) -> int:
    written = 0
    if fmt == "jsonl":
        async for item in items:
            _write_json(out, {**item.data, "_url": item.url, "_spider": item.spider})
            written += 1
        return written

    sample: list[ItemRecord] = []
    async for item in items:
        sample.append(item)
        if len(sample) == _ITEM_SAMPLE:
            break
    reserved = {*_ITEM_META, _EXTRA}
    keys = dict.fromkeys(k for item in sample for k in item.data if k not in reserved)
    columns = list(keys)
    writer = CsvWriter(out, escape_formulas)
    writer.writerow([*columns, *_ITEM_META, _EXTRA])

    def row(item: ItemRecord) -> list[str]:
        extra = {k: v for k, v in item.data.items() if k not in keys}
        cells = cell_texts(item.data.get(c) for c in columns)
        return [*cells, item.url, item.spider, json_text(extra) if extra else ""]

    for item in sample:
        writer.writerow(row(item))
        written += 1
    if len(sample) == _ITEM_SAMPLE:  # more may follow: the same iterator goes on
        async for item in items:
            writer.writerow(row(item))
            written += 1
    return written


def _write_json(out: TextIO, row: dict[str, Any]) -> None:
    out.write(json_text(row))
    out.write("\n")
