"""Export what a `Store` holds: JSON Lines, CSV or Parquet, streaming.

* `crawlq.export.rows`: a record as a row, the column orders, ISO 8601 times (`iso_utc`).
* `crawlq.export.jsonl_csv`: `export`, JSON Lines or CSV to a text stream; CSV cell text and
  the formula-injection guard (`neutralise`).
* `crawlq.export.filters`: which records an export keeps (``--status``, ``--host``,
  ``--spider``).
* `crawlq.export.parquet`: `export_parquet` (needs the ``parquet`` extra, pyarrow; not
  imported here, so this package works without it).
"""

from __future__ import annotations

from crawlq.export.jsonl_csv import export, neutralise
from crawlq.export.rows import (
    ERROR_COLUMNS,
    PAGE_COLUMNS,
    at_since,
    dead_row,
    error_row,
    filtered_row,
    iso_utc,
    mapped,
    page_row,
)

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
