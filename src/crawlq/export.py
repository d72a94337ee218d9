"""Export what a `Store` holds as JSON Lines or CSV, streaming (Parquet: `crawlq.export_parquet`).

Rows, by ``what`` (keys in this order; times as ISO 8601 UTC with milliseconds and ``Z``,
fingerprints as lower-case hex):

* ``pages``: url, final_url, status, content_type, depth, title, fetched_at, size (bytes),
  elapsed_s, attempt, error, spider, fingerprint, warc_file, warc_offset (None unless the
  crawl archived to WARC), canonical_url (the page's ``<link rel="canonical">``, or None),
  then ``body_b64`` (the stored body in base64, None when the page
  was stored without one) only when bodies are asked for.
* ``items``: the item's own fields, then ``_url`` (the page URL) and ``_spider``. In JSON
  Lines, an item field named ``_url`` or ``_spider`` is shadowed by crawlq's value.
* ``dead``: url, reason, detail, attempts, depth, at, fingerprint.
* ``filtered``: url, reason, depth, at, fingerprint.
* ``errors``: the pages whose spider callback failed: url, final_url, status, error_type (the
  kind, such as ``KeyError``: `crawlq.records.spider_error_type`), error, callback (the
  callback the request named; ``parse`` when none, None when the store does not know),
  spider, fetched_at, fingerprint, replayable (whether ``crawlq reparse`` can rerun it
  without fetching: a body was kept or a WARC record written), warc_file, warc_offset.

JSON Lines: one JSON object per line, UTF-8 characters unescaped. CSV (RFC 4180 via the `csv`
module, CRLF line ends; open files with ``newline=""``): one header row, then one row per
record. None is an empty cell, strings are written as they are, and any other value as JSON
(``true``, ``1.5``, ``[1, 2]``). Item columns are the union of the keys of the first 1000
items, in first-seen order, then ``_url``, ``_spider`` and ``_extra``: a JSON object holding a
later item's keys that have no column (empty when there are none).

CSV cells are neutralised against formula injection (OWASP "CSV injection") unless
``escape_formulas`` is false: a text cell (header names included) that starts with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return, and is not a plain number, gets a ``'``
prefix, so a spreadsheet shows it as text instead of evaluating ``=cmd|' /C calc'!A0``.
JSON Lines and Parquet keep every value as it is.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TextIO, TypeVar

from crawlq.records import (
    DeadRecord,
    FilteredRecord,
    ItemRecord,
    PageRecord,
    spider_error_type,
)
from crawlq.store.base import Store

__all__ = [
    "ERROR_COLUMNS",
    "PAGE_COLUMNS",
    "at_since",
    "dead_row",
    "error_row",
    "export",
    "filtered_row",
    "iso_utc",
    "mapped",
    "neutralise",
    "page_row",
]

_R = TypeVar("_R")
_Timed = TypeVar("_Timed", DeadRecord, FilteredRecord)

_ITEM_SAMPLE = 1000
"""Items read before the CSV header is fixed."""
_ITEM_META = ("_url", "_spider")
_EXTRA = "_extra"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula (OWASP)."""
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")

PAGE_COLUMNS = (
    "url",
    "final_url",
    "status",
    "content_type",
    "depth",
    "title",
    "fetched_at",
    "size",
    "elapsed_s",
    "attempt",
    "error",
    "spider",
    "fingerprint",
    "warc_file",
    "warc_offset",
    "canonical_url",
    "referrer",
)
"""Keys of an exported page, in order (``body_b64`` follows when bodies are exported)."""
_BODY = "body_b64"
ERROR_COLUMNS = (
    "url",
    "final_url",
    "status",
    "error_type",
    "error",
    "callback",
    "spider",
    "fetched_at",
    "fingerprint",
    "replayable",
    "warc_file",
    "warc_offset",
)
"""Keys of an exported spider error (``--what errors``), in order."""
_DEAD_COLUMNS = ("url", "reason", "detail", "attempts", "depth", "at", "fingerprint", "referrer")
_FILTERED_COLUMNS = ("url", "reason", "depth", "at", "fingerprint")


def iso_utc(ts: float) -> str:
    """Format Unix seconds as ISO 8601 UTC to the millisecond: ``2026-11-29T18:01:02.123Z``.

    Args:
        ts: Unix time in seconds; rounded to the nearest millisecond.
    """
    moment = _EPOCH + timedelta(milliseconds=round(ts * 1000))
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


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
        columns = (*PAGE_COLUMNS, _BODY) if with_body else PAGE_COLUMNS
        to_row = _page_row_with_body if with_body else page_row
        pages = store.pages(since=since, with_body=with_body, spider_errors_only=spider_errors_only)
        rows = mapped(pages, to_row)
    elif what == "errors":
        columns = ERROR_COLUMNS
        failed = store.pages(since=since, with_body=True, spider_errors_only=True)
        rows = mapped(failed, error_row)
    elif what == "dead":
        columns, rows = _DEAD_COLUMNS, mapped(at_since(store.dead(), since), dead_row)
    elif what == "filtered":
        rows = mapped(at_since(store.filtered(), since), filtered_row)
        columns = _FILTERED_COLUMNS
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
    writer = _CsvWriter(out, escape_formulas)
    writer.writerow(columns)
    async for row in rows:
        writer.writerow(_cells(row[c] for c in columns))
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
    writer = _CsvWriter(out, escape_formulas)
    writer.writerow([*columns, *_ITEM_META, _EXTRA])

    def row(item: ItemRecord) -> list[str]:
        extra = {k: v for k, v in item.data.items() if k not in keys}
        cells = _cells(item.data.get(c) for c in columns)
        return [*cells, item.url, item.spider, _json(extra) if extra else ""]

    for item in sample:
        writer.writerow(row(item))
        written += 1
    if len(sample) == _ITEM_SAMPLE:  # more may follow: the same iterator goes on
        async for item in items:
            writer.writerow(row(item))
            written += 1
    return written


def page_row(page: PageRecord, time: Callable[[float], Any] = iso_utc) -> dict[str, Any]:
    """A page record as an export row (`PAGE_COLUMNS`), times converted by ``time``."""
    return {
        "url": page.url,
        "final_url": page.final_url,
        "status": page.status,
        "content_type": page.content_type,
        "depth": page.depth,
        "title": page.title,
        "fetched_at": time(page.fetched_at),
        "size": page.size_bytes,
        "elapsed_s": page.elapsed_s,
        "attempt": page.attempt,
        "error": page.error,
        "spider": page.spider,
        "fingerprint": page.fingerprint.hex(),
        "warc_file": page.warc_file,
        "warc_offset": page.warc_offset,
        "canonical_url": page.canonical_url,
        "referrer": page.referrer,
    }


def error_row(page: PageRecord, time: Callable[[float], Any] = iso_utc) -> dict[str, Any]:
    """A page with a spider error as an export row (`ERROR_COLUMNS`), times by ``time``.

    ``replayable`` needs the page read with its body (``with_body``): a page read without
    one counts as replayable only through a WARC record.
    """
    return {
        "url": page.url,
        "final_url": page.final_url,
        "status": page.status,
        "error_type": spider_error_type(page.error),
        "error": page.error,
        "callback": _callback_of(page.request),
        "spider": page.spider,
        "fetched_at": time(page.fetched_at),
        "fingerprint": page.fingerprint.hex(),
        "replayable": page.body is not None or page.warc_file is not None,
        "warc_file": page.warc_file,
        "warc_offset": page.warc_offset,
    }


def _callback_of(request: str | None) -> str | None:
    """The callback a stored request names (``parse`` when none), or None if unknown."""
    if request is None:
        return None
    with contextlib.suppress(ValueError):
        data = json.loads(request)
        if isinstance(data, dict):
            callback = data.get("callback") or "parse"
            return callback if isinstance(callback, str) else None
    return None


def _page_row_with_body(page: PageRecord) -> dict[str, Any]:
    row = page_row(page)
    row[_BODY] = None if page.body is None else base64.b64encode(page.body).decode("ascii")
    return row


def dead_row(dead: DeadRecord, time: Callable[[float], Any] = iso_utc) -> dict[str, Any]:
    """A dead letter as an export row, times converted by ``time``."""
    return {
        "url": dead.url,
        "reason": dead.reason,
        "detail": dead.detail,
        "attempts": dead.attempts,
        "depth": dead.depth,
        "at": time(dead.at),
        "fingerprint": dead.fingerprint.hex(),
        "referrer": dead.referrer,
    }


def filtered_row(record: FilteredRecord, time: Callable[[float], Any] = iso_utc) -> dict[str, Any]:
    """A filtered record as an export row, times converted by ``time``."""
    return {
        "url": record.url,
        "reason": record.reason,
        "depth": record.depth,
        "at": time(record.at),
        "fingerprint": record.fingerprint.hex(),
    }


async def mapped(
    records: AsyncIterator[_R], to_row: Callable[[_R], dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    """Rows made by ``to_row`` from ``records``, streaming."""
    async for record in records:
        yield to_row(record)


async def at_since(records: AsyncIterator[_Timed], since: float | None) -> AsyncIterator[_Timed]:
    """Keep the dead or filtered records whose ``at`` is ``since`` or later (None: all)."""
    async for record in records:
        if since is None or record.at >= since:
            yield record


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _write_json(out: TextIO, row: dict[str, Any]) -> None:
    out.write(_json(row))
    out.write("\n")


def neutralise(cell: str) -> str:
    """``cell`` with a ``'`` prefix when a spreadsheet would evaluate it as a formula.

    Text starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, except plain
    numbers such as ``-1.5``, which a spreadsheet reads as the number they are.
    """
    if cell.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


class _CsvWriter:
    """``csv.writer`` whose rows are neutralised (`neutralise`) when ``escape`` is set."""

    def __init__(self, out: TextIO, escape: bool) -> None:
        self._writer = csv.writer(out)
        self._escape = escape

    def writerow(self, row: Iterable[str]) -> None:
        self._writer.writerow([neutralise(c) for c in row] if self._escape else list(row))


def _cells(values: Iterable[Any]) -> list[str]:
    return ["" if v is None else v if isinstance(v, str) else _json(v) for v in values]
