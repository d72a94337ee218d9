"""Export what a `Store` holds as JSON Lines, a JSON array or CSV, streaming (Parquet elsewhere).

Parquet is `crawlq.export.parquet`. A JSON array (``json``) holds the same objects as JSON
Lines, one per line between ``[`` and ``]``, written as they come: valid JSON even when it
is empty (``[]``).

Rows come from `crawlq.export.rows`.

JSON Lines: one JSON object per line, UTF-8 characters unescaped. CSV (RFC 4180 via the `csv`
module, CRLF line ends; open files with ``newline=""``): one header row, then one row per
record. None is an empty cell, strings are written as they are, and any other value as JSON
(``true``, ``1.5``, ``[1, 2]``). Item columns are the union of the keys of the first 1000
items, in first-seen order, then ``_url``, ``_spider`` and ``_extra``: a JSON object holding a
later item's keys that have no column (empty when there are none).

CSV cells are neutralised against formula injection (OWASP "CSV injection") unless
``escape_formulas`` is false: a text cell (header names included) that starts with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return, and is not a plain number, gets a ``'``
prefix, so a spreadsheet shows it as text instead of evaluating ``=cmd|' /C calc'!A0``
(`neutralise`). JSON Lines and Parquet keep every value as it is.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Literal, TextIO

from crawlq.export.filters import RecordFilter, kept
from crawlq.export.rows import (
    BODY_COLUMN,
    DEAD_COLUMNS,
    ERROR_COLUMNS,
    FILTERED_COLUMNS,
    PAGE_COLUMNS,
    BodyReader,
    at_since,
    dead_row,
    error_row,
    filtered_row,
    mapped,
    page_row,
    page_row_with_body,
    with_bodies,
)
from crawlq.records import ItemRecord
from crawlq.store.contract import Store

__all__ = ["CsvWriter", "cell_texts", "export", "json_text", "neutralise"]

_ITEM_SAMPLE = 1000
"""Items read before the CSV header is fixed."""
_ITEM_META = ("_url", "_spider")
_EXTRA = "_extra"


async def export(
    store: Store,
    what: Literal["pages", "items", "dead", "filtered", "errors"],
    fmt: Literal["jsonl", "json", "csv"],
    out: TextIO,
    *,
    since: float | None = None,
    with_body: bool = False,
    escape_formulas: bool = True,
    spider_errors_only: bool = False,
    where: RecordFilter | None = None,
    csv_header: Sequence[str] | None = None,
    bodies: BodyReader | None = None,
) -> int:
    """Write every record of one kind from ``store`` to ``out``, streaming.

    Records come in the store's order (by time; see `crawlq.store.Store`) and are written as
    they arrive, so memory stays bounded whatever the size of the crawl. The row shapes are in
    the module docstring.

    Args:
        store: The store to read.
        what: Which records: ``pages``, ``items``, ``dead``, ``filtered`` or ``errors``
            (pages with a spider error, as `error_row`).
        fmt: ``jsonl`` (JSON Lines), ``json`` (one JSON array) or ``csv``.
        out: A text stream open for writing (UTF-8; for CSV files, ``newline=""``).
        since: Only records from this Unix time on, in seconds (``fetched_at`` of pages,
            ``created_at`` of items, ``at`` of dead and filtered records); None: all.
        with_body: Pages only: add each page's stored body as ``body_b64``.
        escape_formulas: CSV only: prefix with ``'`` the text cells a spreadsheet would
            evaluate as a formula (see the module docstring); False writes them raw.
        spider_errors_only: Pages only: just those with a spider error.
        where: Only the records it keeps (`crawlq.export.filters.RecordFilter`).
        csv_header: CSV only: the header of the file these rows are appended to. It is not
            written again, and item rows follow its columns (the keys it has no column for
            go to ``_extra``); pages and other records must have the same columns.
        bodies: With ``with_body``: reads the bodies of the pages stored without one from
            their WARC records (``crawlq export --warc``); None: stored bodies only.

    Returns:
        The number of records written (the CSV header not counted).

    Raises:
        ValueError: ``what`` or ``fmt`` is not one of the values above.
        StoreError: Reading the store failed (see `crawlq.store.Store`); rows already written
            stay in ``out``.
    """
    if fmt not in ("jsonl", "json", "csv"):
        raise ValueError(f"unknown export format {fmt!r}: use jsonl, json or csv")
    if where is not None:
        where.check(what)
    if what == "items":
        items = kept(store.items(since=since), where)
        if fmt == "json":
            return await _write_array(out, mapped(items, _item_row))
        return await _export_items(items, fmt, out, escape_formulas, csv_header)
    columns, rows = _record_rows(store, what, since, with_body, spider_errors_only, where, bodies)
    if fmt == "json":
        return await _write_array(out, rows)
    if fmt == "jsonl":
        written = 0
        async for row in rows:
            _write_json(out, row)
            written += 1
        return written
    return await _write_csv(out, columns, rows, escape_formulas, csv_header, what)


def _record_rows(
    store: Store,
    what: str,
    since: float | None,
    with_body: bool,
    spider_errors_only: bool,
    where: RecordFilter | None,
    bodies: BodyReader | None = None,
) -> tuple[tuple[str, ...], AsyncIterator[dict[str, Any]]]:
    """The columns and the rows of the pages, errors, dead or filtered records to export."""
    if what == "pages":
        columns = (*PAGE_COLUMNS, BODY_COLUMN) if with_body else PAGE_COLUMNS
        to_row = page_row_with_body if with_body else page_row
        pages = store.pages(since=since, with_body=with_body, spider_errors_only=spider_errors_only)
        return columns, mapped(with_bodies(kept(pages, where), bodies), to_row)
    if what == "errors":
        failed = store.pages(since=since, with_body=True, spider_errors_only=True)
        return ERROR_COLUMNS, mapped(kept(failed, where), error_row)
    if what == "dead":
        return DEAD_COLUMNS, mapped(kept(at_since(store.dead(), since), where), dead_row)
    if what == "filtered":
        filtered = kept(at_since(store.filtered(), since), where)
        return FILTERED_COLUMNS, mapped(filtered, filtered_row)
    raise ValueError(f"unknown export kind {what!r}: use pages, items, dead, filtered or errors")


async def _write_csv(
    out: TextIO,
    columns: tuple[str, ...],
    rows: AsyncIterator[dict[str, Any]],
    escape_formulas: bool,
    csv_header: Sequence[str] | None,
    what: str,
) -> int:
    """Write ``rows`` as CSV: the header (unless appending after ``csv_header``), then rows."""
    writer = CsvWriter(out, escape_formulas)
    if csv_header is None:
        writer.writerow(columns)
    elif list(csv_header) != list(columns):
        raise ValueError(f"the CSV file has other columns than {what} records: cannot append")
    written = 0
    async for row in rows:
        writer.writerow(cell_texts(row[c] for c in columns))
        written += 1
    return written


def _item_row(item: ItemRecord) -> dict[str, Any]:
    """An item as an exported JSON object: its fields, then ``_url`` and ``_spider``."""
    return {**item.data, "_url": item.url, "_spider": item.spider}


async def _export_items(
    items: AsyncIterator[ItemRecord],
    fmt: str,
    out: TextIO,
    escape_formulas: bool = True,
    csv_header: Sequence[str] | None = None,
) -> int:
    written = 0
    if fmt == "jsonl":
        async for item in items:
            _write_json(out, _item_row(item))
            written += 1
        return written

    sample: list[ItemRecord] = []
    async for item in items:
        sample.append(item)
        if len(sample) == _ITEM_SAMPLE:
            break
    reserved = {*_ITEM_META, _EXTRA}
    if csv_header is not None:
        keys = dict.fromkeys(k for k in csv_header if k not in reserved)
    else:
        keys = dict.fromkeys(k for item in sample for k in item.data if k not in reserved)
    columns = list(keys)
    writer = CsvWriter(out, escape_formulas)
    if csv_header is None:
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


async def _write_array(out: TextIO, rows: AsyncIterator[dict[str, Any]]) -> int:
    """Write ``rows`` as one JSON array, one object per line, streaming; return the count."""
    written = 0
    out.write("[")
    async for row in rows:
        out.write(",\n" if written else "\n")
        out.write(json_text(row))
        written += 1
    out.write("\n]\n" if written else "]\n")
    return written


def _write_json(out: TextIO, row: dict[str, Any]) -> None:
    out.write(json_text(row))
    out.write("\n")


# -- CSV cells -------------------------------------------------------------------------------

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula (OWASP)."""
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def json_text(value: Any) -> str:
    """``value`` as JSON text, non-ASCII characters as they are."""
    return json.dumps(value, ensure_ascii=False)


def neutralise(cell: str) -> str:
    """``cell`` with a ``'`` prefix when a spreadsheet would evaluate it as a formula.

    Text starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, except plain
    numbers such as ``-1.5``, which a spreadsheet reads as the number they are.
    """
    if cell.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


class CsvWriter:
    """``csv.writer`` whose rows are neutralised (`neutralise`) when ``escape`` is set."""

    def __init__(self, out: TextIO, escape: bool) -> None:
        self._writer = csv.writer(out)
        self._escape = escape

    def writerow(self, row: Iterable[str]) -> None:
        """Write one row."""
        self._writer.writerow([neutralise(c) for c in row] if self._escape else list(row))


def cell_texts(values: Iterable[Any]) -> list[str]:
    """Values as CSV cell text (module docstring), before `neutralise`."""
    return ["" if v is None else v if isinstance(v, str) else json_text(v) for v in values]
