"""The Parquet export, under its first name: `crawlq.export.parquet` (needs pyarrow).

Kept so that ``from crawlq.export_parquet import export_parquet`` goes on working.
"""

from __future__ import annotations

from crawlq.export.parquet import BATCH_ROWS, export_parquet, schema_of

__all__ = ["BATCH_ROWS", "export_parquet", "schema_of"]
