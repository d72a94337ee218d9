"""The PostgreSQL typed items table (``--items-table``): columns, rows, replacement, refusals."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any, TypedDict

import pytest

from crawlq.errors import ConfigError
from crawlq.items.schema import ItemTable
from crawlq.records import ItemRecord
from crawlq.store import ParseUpdate, ResultBatch, open_store
from tests.conftest import pg_schema
from tests.store.test_postgres_store import dead, in_schema, page

psycopg = pytest.importorskip("psycopg")

from psycopg import sql  # noqa: E402


@dataclasses.dataclass
class Product:
    name: str
    price: int
    in_stock: bool
    tags: list[str]
    rating: float | None = None
    released: dt.date | None = None
    seen: dt.datetime | None = None


def product(n: int, index: int, **data: Any) -> ItemRecord:
    url = f"https://example.com/{n}"
    values = {"name": f"p{n}-{index}", "price": n * 10 + index, "in_stock": True, "tags": ["a"]}
    return ItemRecord(n.to_bytes(20, "big"), index, url, "docs", {**values, **data}, 5.0)


@pytest.fixture
async def pg(postgres_url: str) -> AsyncIterator[tuple[str, str]]:
    async with pg_schema(postgres_url) as schema:
        yield in_schema(postgres_url, schema), schema


async def _query(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall()


async def _rows(url: str) -> list[tuple[Any, ...]]:
    return await _query(
        url, "SELECT crawlq_index, name, price, in_stock, tags, crawlq_job FROM products ORDER BY 1"
    )


async def test_the_table_has_one_typed_column_per_field(pg: tuple[str, str]) -> None:
    url, schema = pg
    store = await open_store(url, items_table=ItemTable.of("products", Product))
    await store.close()
    columns = await _query(
        url,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = 'products' ORDER BY ordinal_position",
        schema,
    )
    assert columns == [
        ("crawlq_fingerprint", "bytea", "NO"),
        ("crawlq_index", "integer", "NO"),
        ("crawlq_job", "text", "YES"),
        ("crawlq_url", "text", "NO"),
        ("crawlq_stored_at", "timestamp with time zone", "NO"),
        ("name", "text", "NO"),
        ("price", "bigint", "NO"),
        ("in_stock", "boolean", "NO"),
        ("tags", "jsonb", "NO"),
        ("rating", "double precision", "YES"),
        ("released", "date", "YES"),
        ("seen", "timestamp with time zone", "YES"),
    ]


async def test_rows_match_the_items_and_a_rewritten_page_replaces_them(
    pg: tuple[str, str],
) -> None:
    url, _ = pg
    store = await open_store(url, items_table=ItemTable.of("products", Product))
    try:
        when = "2026-05-01T12:00:00+02:00"
        items = [product(1, 0, rating=4.5, released="2026-01-02", seen=when), product(1, 1)]
        await store.write(ResultBatch(pages=[page(1)], items=items, job="shop"))
        got = await _query(
            url, "SELECT crawlq_index, rating, released, seen, crawlq_url FROM products"
        )
        assert sorted(got) == [
            (0, 4.5, dt.date(2026, 1, 2), dt.datetime(2026, 5, 1, 10, tzinfo=dt.UTC),
             "https://example.com/1"),
            (1, None, None, None, "https://example.com/1"),
        ]  # fmt: skip
        assert await _rows(url) == [
            (0, "p1-0", 10, True, ["a"], "shop"),
            (1, "p1-1", 11, True, ["a"], "shop"),
        ]
        # The page fetched again now yields one item: the other one's row is gone.
        again = [product(1, 0, price=99)]
        await store.write(ResultBatch(pages=[page(1)], items=again, job="shop"))
        assert await _rows(url) == [(0, "p1-0", 99, True, ["a"], "shop")]
        # The JSONB items table is written as before.
        assert [i.data["price"] for i in [x async for x in store.items()]] == [99]
        # The URL became a dead letter: its typed rows go with its items.
        await store.write(ResultBatch(dead=[dead(1)], job="shop"))
        assert await _rows(url) == []
    finally:
        await store.close()


async def test_a_reparse_replaces_the_typed_rows_and_keeps_the_job(pg: tuple[str, str]) -> None:
    url, _ = pg
    store = await open_store(url, items_table=ItemTable.of("products", Product))
    try:
        p = page(2)
        items = [product(2, 0), product(2, 1), product(2, 2)]
        await store.write(ResultBatch(pages=[p], items=items, job="shop"))
        update = ParseUpdate(p.fingerprint, p.fetched_at, None, "docs", [product(2, 0, price=7)])
        assert await store.replace_parse([update]) == {p.fingerprint}
        assert await _rows(url) == [(0, "p2-0", 7, True, ["a"], "shop")]
    finally:
        await store.close()


async def test_an_item_of_the_wrong_type_keeps_only_its_jsonb_row(
    pg: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    url, _ = pg
    store = await open_store(url, items_table=ItemTable.of("products", Product))
    try:
        items = [product(3, 0, price="ten"), product(3, 1), product(3, 2, name=None)]
        await store.write(ResultBatch(pages=[page(3)], items=items))
        assert [r[0] for r in await _rows(url)] == [1]
        assert len([x async for x in store.items()]) == 3
    finally:
        await store.close()
    warnings = [r.getMessage() for r in caplog.records if "no typed row" in r.getMessage()]
    assert len(warnings) == 2
    assert "field 'price': expected int, got str" in warnings[0]
    assert "ten" not in " ".join(warnings)  # values are never logged
    assert "field 'name': missing or null" in warnings[1]


async def test_a_table_with_other_columns_is_refused_and_left_alone(pg: tuple[str, str]) -> None:
    url, schema = pg
    store = await open_store(url)  # creates the schema
    await store.close()
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(
            sql.SQL(
                "CREATE TABLE {}.products (crawlq_fingerprint bytea, name integer, extra text)"
            ).format(sql.Identifier(schema))
        )
    with pytest.raises(ConfigError) as caught:
        await open_store(url, items_table=ItemTable.of("products", Product))
    message = str(caught.value)
    assert caught.value.name == "items_table"
    assert "missing price (bigint)" in message
    assert "unexpected extra (text)" in message
    assert "name is integer, expected text" in message
    names = await _query(
        url,
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = 'products' ORDER BY ordinal_position",
        schema,
    )
    assert names == [("crawlq_fingerprint",), ("name",), ("extra",)]  # never altered


async def test_a_store_table_name_and_sqlite_are_refused(
    pg: tuple[str, str], tmp_path: Any
) -> None:
    url, _ = pg
    with pytest.raises(ConfigError, match="one of the store's own tables"):
        await open_store(url, items_table=ItemTable.of("items", Product))
    with pytest.raises(ConfigError, match="needs a PostgreSQL store") as caught:
        await open_store(str(tmp_path / "c.db"), items_table=ItemTable.of("products", Product))
    assert caught.value.name == "items_table"


async def test_an_odd_field_name_is_a_quoted_column(pg: tuple[str, str]) -> None:
    url, _ = pg
    Odd = TypedDict("Odd", {"select": int, "Mixed Case": str})  # a keyword, a space
    store = await open_store(url, items_table=ItemTable.of("odd items", Odd))
    try:
        data = {"select": 1, "Mixed Case": "x"}
        record = ItemRecord((4).to_bytes(20, "big"), 0, "https://example.com/4", "d", data, 1.0)
        await store.write(ResultBatch(pages=[page(4)], items=[record]))
    finally:
        await store.close()
    assert await _query(url, 'SELECT "select", "Mixed Case" FROM "odd items"') == [(1, "x")]
