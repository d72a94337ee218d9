"""Row layouts of the SQL stores: the records a read's rows become.

Each read selects its columns in the order these functions take them (`crawlq.store.reads`
builds the queries): pages in `crawlq.records.PageRecord` field order (``fingerprint`` …
``request``), items as ``(created_at, fingerprint, idx, url, spider, data)``, dead letters
as ``(at, fingerprint, url, reason, detail, attempts, depth, referrer)``, filtered URLs as
``(at, fingerprint, url, reason, depth)``: the time first, the order streams are read in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.store.outcomes import StoredOutcome

__all__ = [
    "dead_from_row",
    "filtered_from_row",
    "item_from_row",
    "outcomes_from_rows",
    "page_from_row",
]


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
