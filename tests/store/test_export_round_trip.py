"""Exports read back equal to what was stored: JSON Lines and Parquet, over every backend."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crawlq.export import PAGE_COLUMNS, export
from crawlq.records import PageRecord
from crawlq.store import ResultBatch, Store

from .test_contract import dead, filtered, item, page

pq = pytest.importorskip("pyarrow.parquet")

from crawlq.export.parquet import BATCH_ROWS, export_parquet  # noqa: E402


def stored_pages() -> list[PageRecord]:
    return [
        page(n, body=b"<html>\x00\xff" + bytes([n]) * n, warc_file="w.warc.gz", warc_offset=n)
        if n % 2
        else page(n)
        for n in range(7)
    ]


def ts(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


async def test_pages_jsonl_with_bodies_reads_back_equal(store: Store) -> None:
    pages = stored_pages()
    await store.write(ResultBatch(pages=pages))
    out = io.StringIO()
    assert await export(store, "pages", "jsonl", out, with_body=True) == len(pages)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [list(row) for row in rows] == [[*PAGE_COLUMNS, "body_b64"]] * len(pages)
    back = [
        PageRecord(
            fingerprint=bytes.fromhex(r["fingerprint"]),
            url=r["url"],
            final_url=r["final_url"],
            status=r["status"],
            content_type=r["content_type"],
            depth=r["depth"],
            title=r["title"],
            fetched_at=ts(r["fetched_at"]),
            size_bytes=r["size"],
            elapsed_s=r["elapsed_s"],
            attempt=r["attempt"],
            error=r["error"],
            spider=r["spider"],
            body=None if r["body_b64"] is None else base64.b64decode(r["body_b64"]),
            warc_file=r["warc_file"],
            warc_offset=r["warc_offset"],
            referrer=r["referrer"],
        )
        for r in rows
    ]
    assert back == pages  # fetched_at is whole seconds here, so milliseconds lose nothing

    plain = io.StringIO()
    await export(store, "pages", "jsonl", plain)
    assert all("body_b64" not in json.loads(line) for line in plain.getvalue().splitlines())


async def test_parquet_round_trips_every_kind(store: Store, tmp_path: Path) -> None:
    pages = stored_pages()
    items = [item(1, 0), item(1, 1, data={"nested": {"x": [1, None]}, "text": "ü"})]
    await store.write(
        ResultBatch(pages=pages, items=items, dead=[dead(20)], filtered=[filtered(21)])
    )

    path = tmp_path / "pages.parquet"
    assert await export_parquet(store, "pages", path, with_body=True) == len(pages)
    table = pq.read_table(path)
    assert table.column_names == [*PAGE_COLUMNS, "body"]
    rows = table.to_pylist()
    assert [r["url"] for r in rows] == [p.url for p in pages]
    assert [r["body"] for r in rows] == [p.body for p in pages]
    assert [(r["warc_file"], r["warc_offset"]) for r in rows] == [
        (p.warc_file, p.warc_offset) for p in pages
    ]
    assert [r["fetched_at"].timestamp() for r in rows] == [p.fetched_at for p in pages]
    assert [r["fingerprint"] for r in rows] == [p.fingerprint.hex() for p in pages]
    assert [(r["status"], r["size"], r["title"]) for r in rows] == [
        (p.status, p.size_bytes, p.title) for p in pages
    ]
    assert await export_parquet(store, "pages", path) == len(pages)
    assert "body" not in pq.read_table(path).column_names

    assert await export_parquet(store, "items", path) == 2
    assert [
        (r["url"], r["index"], json.loads(r["data"])) for r in pq.read_table(path).to_pylist()
    ] == [(i.url, i.index, i.data) for i in items]
    assert await export_parquet(store, "dead", path) == 1
    [row] = pq.read_table(path).to_pylist()
    assert (row["url"], row["reason"], row["attempts"]) == (dead(20).url, "http_503", 4)
    assert row["at"].timestamp() == dead(20).at
    assert await export_parquet(store, "filtered", path, since=dead(20).at + 100) == 0
    assert pq.read_table(path).num_rows == 0


async def test_parquet_is_written_in_record_batches(store: Store, tmp_path: Path) -> None:
    n = 2 * BATCH_ROWS + 500
    for start in range(0, n, 1000):
        await store.write(ResultBatch(pages=[page(i) for i in range(start, min(n, start + 1000))]))
    path = tmp_path / "pages.parquet"
    assert await export_parquet(store, "pages", path) == n
    meta = pq.ParquetFile(path).metadata
    assert meta.num_rows == n
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [
        BATCH_ROWS,
        BATCH_ROWS,
        500,
    ]


def test_parquet_without_pyarrow_names_the_extra(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['pyarrow'] = None; from crawlq.cli import main; "
        f"sys.argv = ['crawlq', 'export', '--store', {str(tmp_path / 'x.db')!r}, "
        f"'--format', 'parquet', '-o', {str(tmp_path / 'x.parquet')!r}]; main()"
    )
    (tmp_path / "x.db").touch()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert "pip install 'crawlq[parquet]'" in done.stderr
    assert not (tmp_path / "x.parquet").exists()
