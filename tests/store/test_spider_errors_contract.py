"""The Store contract for spider errors: counting them by kind, selecting them, and replacing
a page's parse results (`Store.replace_parse`, what ``crawlq reparse`` writes). Run against
every backend by the `store` fixture (SQLite and PostgreSQL)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from crawlq.errors import StoreError
from crawlq.records import spider_error
from crawlq.store import ParseUpdate, ResultBatch, Store, open_store
from crawlq.store.sqlite import SqliteStore
from tests.store.conftest import sqlite_store_at_version
from tests.store.test_contract import collect, dead, fp, item, page

KEY_ERROR = spider_error("KeyError", "callback 'parse': 'title'")
TYPE_ERROR = spider_error("TypeError", "callback 'parse': produced a int")
LEGACY_RAISED = "spider_error: SpiderError: callback 'parse' on https://x.test/a: ValueError: no"
LEGACY_ITEM = "spider_error: item is not JSON-serialisable: Object of type datetime"


async def test_counts_spider_errors_by_kind_old_forms_included(store: Store) -> None:
    errors = [KEY_ERROR, KEY_ERROR, TYPE_ERROR, LEGACY_RAISED, LEGACY_ITEM]
    others = [None, "http_404", "parse_timeout: ran past 10s", "links_capped: 5 of 9"]
    pages = [page(n, error=e) for n, e in enumerate(errors + others)]
    await store.write(ResultBatch(pages=pages))
    counts = await store.counts()
    assert counts.spider_errors_by_type == {
        "KeyError": 2,
        "TypeError": 1,
        "SpiderError": 1,  # the old form kept its kind after the URL: counted as such
        "UnserialisableItem": 1,
    }
    assert counts.spider_errors == 5
    assert counts.pages == 9


async def test_pages_spider_errors_only_in_order_and_across_chunks(store: Store) -> None:
    pages = [page(n, error=KEY_ERROR if n % 3 == 0 else None) for n in range(2500)]
    await store.write(ResultBatch(pages=pages))
    failed = await collect(store.pages(spider_errors_only=True))
    assert failed == [p for p in pages if p.error is not None]
    assert len(failed) == 834
    since = pages[1500].fetched_at
    later = await collect(store.pages(since=since, spider_errors_only=True))
    assert later == [p for p in pages[1500:] if p.error is not None]
    with_bodies = await collect(store.pages(spider_errors_only=True, with_body=True))
    assert with_bodies == failed


async def test_the_request_of_a_page_round_trips(store: Store) -> None:
    json = '{"url":"https://example.com/1","callback":"parse_item","meta":{"k":"é"}}'
    await store.write(ResultBatch(pages=[page(1, request=json), page(2)]))
    assert [p.request for p in await collect(store.pages())] == [json, None]


def _fixed(n: int, *items_of: int) -> ParseUpdate:
    stored = page(n)
    return ParseUpdate(
        stored.fingerprint,
        stored.fetched_at,
        None,
        "docs-v2",
        [item(n, i, spider="docs-v2", data={"fixed": i}) for i in items_of],
    )


async def test_replace_parse_sets_error_and_items_and_keeps_the_rest(store: Store) -> None:
    broken = page(1, error=KEY_ERROR, body=b"<p>kept</p>", warc_file="a.warc.gz", warc_offset=7)
    broken = dataclasses.replace(broken, request='{"url":"https://example.com/1"}')
    await store.write(
        ResultBatch(pages=[broken, page(2)], items=[item(2, 0), item(2, 1)])
    )  # page 1 failed with no items; page 2 has two
    assert await store.replace_parse([_fixed(1, 0, 1, 2)]) == {fp(1)}
    [one, two] = await collect(store.pages(with_body=True))
    assert one == dataclasses.replace(broken, error=None, spider="docs-v2")
    assert two == page(2)
    items = await collect(store.items())
    assert [(i.fingerprint, i.index, i.data) for i in items if i.fingerprint == fp(1)] == [
        (fp(1), 0, {"fixed": 0}),
        (fp(1), 1, {"fixed": 1}),
        (fp(1), 2, {"fixed": 2}),
    ]
    assert [i for i in items if i.fingerprint == fp(2)] == [item(2, 0), item(2, 1)]
    counts = await store.counts()
    assert (counts.items, counts.spider_errors) == (5, 0)


async def test_replace_parse_twice_is_the_same_store(store: Store) -> None:
    await store.write(ResultBatch(pages=[page(1, error=KEY_ERROR), page(2, error=TYPE_ERROR)]))
    updates = [_fixed(1, 0, 1), _fixed(2)]
    assert await store.replace_parse(updates) == {fp(1), fp(2)}
    first = (await collect(store.pages()), await collect(store.items()), await store.counts())
    assert await store.replace_parse(updates) == {fp(1), fp(2)}
    second = (await collect(store.pages()), await collect(store.items()), await store.counts())
    assert [(p.error, p.spider) for p in second[0]] == [(None, "docs-v2")] * 2
    assert [(i.fingerprint, i.index) for i in second[1]] == [(fp(1), 0), (fp(1), 1)]
    assert [(i.fingerprint, i.index, i.data) for i in first[1]] == [
        (i.fingerprint, i.index, i.data) for i in second[1]
    ]
    assert first[0] == second[0] and first[2] == second[2]


async def test_replace_parse_with_fewer_items_removes_the_rest(store: Store) -> None:
    await store.write(ResultBatch(pages=[page(1)], items=[item(1, i) for i in range(4)]))
    assert len(await store.replace_parse([_fixed(1, 0)])) == 1
    assert [(i.index, i.data) for i in await collect(store.items())] == [(0, {"fixed": 0})]
    still_failing = ParseUpdate(fp(1), page(1).fetched_at, TYPE_ERROR, "docs", [])
    assert len(await store.replace_parse([still_failing])) == 1
    assert await collect(store.items()) == []
    assert (await store.counts()).spider_errors_by_type == {"TypeError": 1}


async def test_replace_parse_never_overwrites_a_newer_fetch_or_another_outcome(
    store: Store,
) -> None:
    await store.write(ResultBatch(pages=[page(1, error=KEY_ERROR), page(2, error=KEY_ERROR)]))
    read = [_fixed(1, 0), _fixed(2, 0)]
    # meanwhile page 1 was fetched again (later fetched_at, its own items) and page 2 died
    refetched = page(1, fetched_at=page(1).fetched_at + 100, error=TYPE_ERROR)
    await store.write(ResultBatch(pages=[refetched], items=[item(1, 0, data={"new": True})]))
    await store.write(ResultBatch(dead=[dead(2)]))
    assert len(await store.replace_parse(read)) == 0
    assert await collect(store.pages()) == [refetched]
    assert [i.data for i in await collect(store.items())] == [{"new": True}]
    assert await collect(store.dead()) == [dead(2)]


async def test_replace_parse_with_unserialisable_items_writes_nothing(store: Store) -> None:
    await store.write(ResultBatch(pages=[page(1, error=KEY_ERROR), page(2, error=KEY_ERROR)]))
    bad = ParseUpdate(fp(2), page(2).fetched_at, None, "d", [item(2, 0, data={"x": float("nan")})])
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        await store.replace_parse([_fixed(1, 0), bad])
    assert [p.error for p in await collect(store.pages())] == [KEY_ERROR, KEY_ERROR]
    assert await collect(store.items()) == []


async def test_replace_parse_of_nothing_is_a_no_op(store: Store) -> None:
    assert len(await store.replace_parse([])) == 0


def test_parse_updates_hold_only_their_pages_items() -> None:
    with pytest.raises(ValueError, match="another page"):
        ParseUpdate(fp(1), 1.0, None, "d", [item(2, 0)])
    with pytest.raises(ValueError, match="repeated"):
        ParseUpdate(fp(1), 1.0, None, "d", [item(1, 0), item(1, 0)])
    with pytest.raises(ValueError, match="20 bytes"):
        ParseUpdate(b"short", 1.0, None, "d")


async def test_a_read_only_store_refuses_replace_parse(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    writable = await SqliteStore.open(path)
    await writable.write(ResultBatch(pages=[page(1, error=KEY_ERROR)]))
    await writable.close()
    read_only = await open_store(str(path), read_only=True)
    try:
        with pytest.raises(StoreError, match="read-only"):
            await read_only.replace_parse([_fixed(1, 0)])
    finally:
        await read_only.close()


async def test_a_version_4_sqlite_store_is_migrated_and_its_errors_found(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    store = await SqliteStore.open(path)
    await store.write(ResultBatch(pages=[page(1, error=KEY_ERROR), page(2)]))
    await store.close()
    sqlite_store_at_version(path, 4)  # what crawlq with store schema 4 left
    read_only = await open_store(str(path), read_only=True)  # read as it is
    try:
        assert [p.request for p in await collect(read_only.pages())] == [None, None]
        assert (await read_only.counts()).spider_errors_by_type == {"KeyError": 1}
    finally:
        await read_only.close()
    store = await SqliteStore.open(path)
    try:
        assert [p.url for p in await collect(store.pages(spider_errors_only=True))] == [page(1).url]
        assert len(await store.replace_parse([_fixed(1, 0)])) == 1
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT fingerprint FROM pages"
            " WHERE substr(error, 1, 14) = 'spider_error: ' ORDER BY fetched_at, fingerprint"
        ).fetchall()
    db.close()
    assert "pages_spider_errors" in " ".join(str(row) for row in plan)


async def test_a_version_4_postgres_store_is_migrated(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawlq.store.postgres import PostgresStore
    from crawlq.store.postgres import schema as postgres_schema
    from crawlq.store.postgres import store as postgres

    with monkeypatch.context() as patch:  # a store made by crawlq at store schema 4
        patch.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:4])
        patch.setattr(postgres, "SCHEMA_VERSION", 4)
        old = await PostgresStore.open(postgres_url, schema=schema)
        await old.close()
    store = await PostgresStore.open(postgres_url, schema=schema)
    try:
        await store.write(ResultBatch(pages=[page(1, error=KEY_ERROR, request="{}"), page(2)]))
        assert [p.request for p in await collect(store.pages())] == ["{}", None]
        assert (await store.counts()).spider_errors_by_type == {"KeyError": 1}
        assert len(await store.replace_parse([_fixed(1, 0)])) == 1
    finally:
        await store.close()
