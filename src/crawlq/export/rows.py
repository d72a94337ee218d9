"""Export rows: a record of the store as a dict of plain values, and the column orders.

Rows, by ``what`` (keys in this order; times as ISO 8601 UTC with milliseconds and ``Z`` by
default, fingerprints as lower-case hex):

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

Both writers use these rows: `crawlq.export.jsonl_csv` (times as text) and
`crawlq.export.parquet` (times as timestamps, through the ``time`` argument).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from crawlq.records import DeadRecord, FilteredRecord, PageRecord, spider_error_type

__all__ = [
    "BODY_COLUMN",
    "DEAD_COLUMNS",
    "ERROR_COLUMNS",
    "FILTERED_COLUMNS",
    "PAGE_COLUMNS",
    "BodyReader",
    "at_since",
    "dead_row",
    "error_row",
    "filtered_row",
    "iso_utc",
    "mapped",
    "page_row",
    "page_row_with_body",
    "with_bodies",
]

BodyReader = Callable[[PageRecord], Awaitable[bytes]]
"""Reads the body of a page stored without one from its WARC record (``export --warc``)."""

_R = TypeVar("_R")
_Timed = TypeVar("_Timed", DeadRecord, FilteredRecord)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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
BODY_COLUMN = "body_b64"
"""The page column of the body in base64, after `PAGE_COLUMNS` when bodies are exported."""
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
DEAD_COLUMNS = ("url", "reason", "detail", "attempts", "depth", "at", "fingerprint", "referrer")
FILTERED_COLUMNS = ("url", "reason", "depth", "at", "fingerprint")


def iso_utc(ts: float) -> str:
    """Format Unix seconds as ISO 8601 UTC to the millisecond: ``2026-11-29T18:01:02.123Z``.

    Args:
        ts: Unix time in seconds; rounded to the nearest millisecond.
    """
    moment = _EPOCH + timedelta(milliseconds=round(ts * 1000))
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


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


def page_row_with_body(page: PageRecord) -> dict[str, Any]:
    """`page_row` with the stored body in base64 as `BODY_COLUMN` (None: stored without one)."""
    row = page_row(page)
    row[BODY_COLUMN] = None if page.body is None else base64.b64encode(page.body).decode("ascii")
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


async def with_bodies(
    pages: AsyncIterator[PageRecord], read: BodyReader | None
) -> AsyncIterator[PageRecord]:
    """``pages``, streaming; those with a WARC record and no stored body get ``read``'s."""
    async for page in pages:
        if read is not None and page.body is None and page.warc_file is not None:
            page = dataclasses.replace(page, body=await read(page))
        yield page


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
