"""The statements the two SQL stores write with: the upserts of a flush, and item data as JSON.

`Writes` spells them for one `crawlq.store.sql.Dialect`; each backend's store module
(`crawlq.store.sqlite.store`, `crawlq.store.postgres.store`) runs them in its one
transaction, after deleting the other kinds' rows of each fingerprint (a fingerprint is
stored as exactly one of a page, a dead letter or a filtered record). `item_json` serialises
an item's data before anything is written, so a bad item fails the call and writes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from crawlq.records import ItemRecord
from crawlq.store.sql import PAGE_COLUMNS, Dialect

__all__ = ["Writes", "item_json"]


@dataclass(frozen=True, slots=True)
class Writes:
    """The upserts of one dialect; each takes its record's columns in table order.

    Pages, dead letters and filtered records take the batch's ``job``
    (`crawlq.records.ResultBatch.job`)
    last; an upsert replaces it with the rest of the row, so a row counts for the job that
    wrote it last.
    """

    upsert_page: str
    insert_item: str
    upsert_dead: str
    upsert_filtered: str

    @classmethod
    def of(cls, d: Dialect) -> Writes:
        """The statements spelled for ``d``."""
        m = d.mark
        return cls(
            upsert_page=f"""
INSERT INTO pages ({PAGE_COLUMNS}, body, warc_file, warc_offset, canonical_url, referrer,
    request, job)
VALUES ({d.marks(20)})
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, final_url = excluded.final_url, status = excluded.status,
    content_type = excluded.content_type, depth = excluded.depth, title = excluded.title,
    fetched_at = excluded.fetched_at, size_bytes = excluded.size_bytes,
    elapsed_s = excluded.elapsed_s, attempt = excluded.attempt, error = excluded.error,
    spider = excluded.spider, body = excluded.body, warc_file = excluded.warc_file,
    warc_offset = excluded.warc_offset, canonical_url = excluded.canonical_url,
    referrer = excluded.referrer, request = excluded.request, job = excluded.job
""",
            insert_item=f"""
INSERT INTO items (fingerprint, idx, url, spider, data, created_at)
VALUES ({m}, {m}, {m}, {m}, {d.json_mark}, {m})
""",
            upsert_dead=f"""
INSERT INTO dead_letters (fingerprint, url, reason, detail, attempts, depth, at, referrer, job)
VALUES ({d.marks(9)})
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, detail = excluded.detail,
    attempts = excluded.attempts, depth = excluded.depth, at = excluded.at,
    referrer = excluded.referrer, job = excluded.job
""",
            upsert_filtered=f"""
INSERT INTO filtered (fingerprint, url, reason, depth, at, job) VALUES ({d.marks(6)})
ON CONFLICT (fingerprint) DO UPDATE SET
    url = excluded.url, reason = excluded.reason, depth = excluded.depth, at = excluded.at,
    job = excluded.job
""",
        )


def item_json(item: ItemRecord) -> str:
    """An item's data as compact JSON text, keys in the spider's order.

    Raises:
        ValueError: The data is not a dict, or not JSON-serialisable (NaN and infinity
            included); the message names the item.
    """
    if not isinstance(item.data, dict):
        raise ValueError(f"item {item.index} of {item.url!r}: data must be a dict")
    try:
        return json.dumps(item.data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"item {item.index} of {item.url!r} is not JSON-serialisable: {exc}"
        ) from exc
