"""Typed sinks end to end: ``crawl --items-table`` into PostgreSQL, typed Parquet, refusals."""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from crawlq.testing import RequestLog, ServerThread, make_static_app
from tests.conftest import pg_schema, run_crawlq
from tests.store.test_postgres_store import in_schema

psycopg = pytest.importorskip("psycopg")
pq = pytest.importorskip("pyarrow.parquet")

FAST = ["--delay", "0", "--retry-delay", "0.05", "-q"]
PAGES = 5

SPIDER = """
import dataclasses
import os

from crawlq.spider import Spider


@dataclasses.dataclass
class Page:
    title: str
    n: int
    long: bool
    words: list[str]
    note: str | None = None


class TypedSpider(Spider):
    name = "typed"
    item_type = Page

    def parse(self, response):
        title = response.css("title::text").get()
        for copy in range(int(os.environ.get("ITEMS_PER_PAGE", "1"))):
            yield {"title": title, "n": copy, "long": len(response.text) > 100,
                   "words": title.split()}
        yield from response.follow_all()
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("site")
    names = ["a", "b", "c", "d", "e"]
    for name in names:
        links = "".join(f'<a href="{n}.html">{n}</a>' for n in names if n != name)
        (root / f"{name}.html").write_text(f"<title>page {name}</title>{links}")
    with ServerThread(make_static_app(root, log=RequestLog())) as server:
        yield server.base_url


@pytest.fixture
def spider(tmp_path: Path) -> str:
    path = tmp_path / "typed.py"
    path.write_text(SPIDER)
    return f"{path}:TypedSpider"


@pytest.fixture
def store(postgres_url: str) -> Iterator[str]:
    async def enter() -> Any:
        manager = pg_schema(postgres_url)
        return manager, await manager.__aenter__()

    manager, schema = asyncio.run(enter())
    try:
        yield in_schema(postgres_url, schema)
    finally:
        asyncio.run(manager.__aexit__(None, None, None))


def _query(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


@pytest.fixture
def jobs(redis_url: str) -> Iterator[tuple[str, list[str]]]:
    """The Redis URL and a list of job names a test appends to; their keys go afterwards."""
    import redis

    from crawlq.frontier.redis import Keyspace

    names: list[str] = []
    yield redis_url, names
    client = redis.Redis.from_url(redis_url)
    for name in names:
        for key in client.scan_iter(match=Keyspace(name).pattern()):
            client.unlink(key)
    client.close()


def _crawl(site: str, store: str, jobs: tuple[str, list[str]], *args: str, items: int = 1) -> None:
    """One crawl as a new shared Redis job (so every page is fetched again)."""
    redis_url, names = jobs
    names.append(f"test-{uuid.uuid4().hex[:12]}")
    run_crawlq(
        "crawl", f"{site}/a.html", "--store", store, "--frontier", redis_url,
        "--job", names[-1], *FAST, *args, env={"ITEMS_PER_PAGE": str(items)},
    )  # fmt: skip


def test_crawl_into_a_typed_items_table_and_again_with_fewer_items(
    site: str, store: str, spider: str, tmp_path: Path, jobs: tuple[str, list[str]]
) -> None:
    args = ["--spider", spider, "--items-table", "pages_typed"]
    _crawl(site, store, jobs, *args, items=2)
    types = _query(
        store,
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_name = 'pages_typed' AND table_schema = current_schema()"
        " ORDER BY ordinal_position",
    )
    assert types[5:] == [
        ("title", "text"),
        ("n", "bigint"),
        ("long", "boolean"),
        ("words", "jsonb"),
        ("note", "text"),
    ]
    rows = _query(store, "SELECT title, n, long, words FROM pages_typed ORDER BY 1, 2")
    assert len(rows) == 2 * PAGES
    assert rows[:2] == [("page a", 0, True, ["page", "a"]), ("page a", 1, True, ["page", "a"])]
    assert _query(store, "SELECT count(*) FROM items") == [(2 * PAGES,)]  # JSONB as before

    # A second crawl fetches every page again (a new frontier) and yields one item a page:
    # each page's rows are replaced, none of the old second items is left.
    out = tmp_path / "items.parquet"
    _crawl(site, store, jobs, *args, "-O", str(out), items=1)
    assert _query(store, "SELECT count(*), max(n) FROM pages_typed") == [(PAGES, 0)]
    schema = pq.read_schema(out)
    assert [(f.name, str(f.type)) for f in schema][5:] == [
        ("title", "string"),
        ("n", "int64"),
        ("long", "bool"),
        ("words", "string"),
        ("note", "string"),
    ]
    table = pq.read_table(out)
    assert sorted(table.column("title").to_pylist()) == [f"page {n}" for n in "abcde"]
    assert set(table.column("words").to_pylist()) >= {'["page","a"]'}


def test_export_item_type_types_the_parquet_columns(
    site: str, store: str, spider: str, tmp_path: Path, jobs: tuple[str, list[str]]
) -> None:
    _crawl(site, store, jobs, "--spider", spider)
    out = tmp_path / "x.parquet"
    run_crawlq(
        "export", "--store", store, "--what", "items", "-o", str(out),
        "--item-type", f"{spider.rpartition(':')[0]}:Page",
    )  # fmt: skip
    assert str(pq.read_schema(out).field("n").type) == "int64"
    assert pq.read_table(out).num_rows == PAGES
    plain = tmp_path / "plain.parquet"
    run_crawlq("export", "--store", store, "--what", "items", "-o", str(plain))
    assert "data" in pq.read_schema(plain).names  # without a type: unchanged


def test_items_table_needs_postgresql_and_a_declared_type(
    site: str, store: str, tmp_path: Path
) -> None:
    sqlite = run_crawlq(
        "crawl", f"{site}/a.html", "--store", str(tmp_path / "c.db"), *FAST,
        "--items-table", "t", check=False,
    )  # fmt: skip
    assert sqlite.returncode == 2
    assert "--items-table t needs a PostgreSQL store" in sqlite.stderr
    assert "Traceback" not in sqlite.stderr
    untyped = run_crawlq(
        "crawl", f"{site}/a.html", "--store", store, "--frontier", str(tmp_path / "f.db"),
        *FAST, "--items-table", "t", check=False,
    )  # fmt: skip
    assert untyped.returncode == 2
    assert "needs a declared item type" in untyped.stderr


SALES = """
import dataclasses
import datetime as dt
import decimal
import os

import pydantic

from crawlq.spider import Spider


@dataclasses.dataclass
class Sale:
    page: str
    price: decimal.Decimal
    day: dt.date
    when: dt.datetime
    raw: bytes


class PydanticSale(pydantic.BaseModel):
    page: str
    price: decimal.Decimal
    day: dt.date
    when: dt.datetime
    raw: bytes


class SaleSpider(Spider):
    name = "sales"
    item_type = PydanticSale if os.environ.get("SALE_MODEL") == "pydantic" else Sale

    def parse(self, response):
        name = response.url.rsplit("/", 1)[-1].removesuffix(".html")
        yield self.item_type(
            page=name,
            price=decimal.Decimal("19.90"),
            day=dt.date(2026, 1, 2),
            when=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
            raw=b"\\xff\\xfe" + name.encode(),  # not UTF-8
        )
        yield from response.follow_all()
"""
WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


@pytest.fixture
def sales(tmp_path: Path) -> str:
    path = tmp_path / "sales.py"
    path.write_text(SALES)
    return str(path)


@pytest.mark.parametrize("model", ["dataclass", "pydantic"])
def test_decimal_date_datetime_and_bytes_fill_the_typed_columns(
    site: str,
    store: str,
    sales: str,
    tmp_path: Path,
    jobs: tuple[str, list[str]],
    model: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SALE_MODEL", model)
    out = tmp_path / "sales.parquet"
    spider = ["--spider", f"{sales}:SaleSpider", "--items-table", "sales"]
    _crawl(site, store, jobs, *spider, "-O", str(out))
    types = _query(
        store,
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_name = 'sales' AND table_schema = current_schema()"
        " ORDER BY ordinal_position",
    )
    assert types[5:] == [
        ("page", "text"),
        ("price", "numeric"),
        ("day", "date"),
        ("when", "timestamp with time zone"),
        ("raw", "bytea"),
    ]
    rows = _query(store, 'SELECT page, price, day, "when", raw FROM sales ORDER BY page')
    assert [(r[0], r[1], r[2], r[3], bytes(r[4])) for r in rows] == [
        (n, Decimal("19.90"), datetime.date(2026, 1, 2), WHEN, b"\xff\xfe" + n.encode())
        for n in "abcde"
    ]
    # The JSONB items: ISO 8601 text, the Decimal's text, base64 bytes (RFC 4648).
    assert _query(store, "SELECT data FROM items ORDER BY data->>'page' LIMIT 1") == [
        ({"page": "a", "price": "19.90", "day": "2026-01-02",
          "when": "2026-01-02T03:04:05+00:00", "raw": "//5h"},)
    ]  # fmt: skip
    schema = pq.read_schema(out)
    assert [(f.name, str(f.type)) for f in schema][5:] == [
        ("page", "string"),
        ("price", "string"),
        ("day", "date32[day]"),
        ("when", "timestamp[us, tz=UTC]"),
        ("raw", "binary"),
    ]
    table = pq.read_table(out).sort_by("page").to_pylist()
    assert [(r["page"], r["price"], r["day"], r["when"], r["raw"]) for r in table] == [
        (n, "19.90", datetime.date(2026, 1, 2), WHEN, b"\xff\xfe" + n.encode()) for n in "abcde"
    ]


def test_a_sqlite_crawl_keeps_the_json_forms_and_exports_typed_parquet(
    site: str, sales: str, tmp_path: Path
) -> None:
    db = tmp_path / "sales.db"
    run_crawlq("crawl", f"{site}/a.html", "--store", str(db), *FAST,
               "--spider", f"{sales}:SaleSpider")  # fmt: skip
    lines = run_crawlq("export", "--store", str(db), "--what", "items").stdout.splitlines()
    items = sorted((json.loads(line) for line in lines), key=lambda i: i["page"])
    assert len(items) == PAGES
    assert {k: items[0][k] for k in ("price", "day", "when", "raw")} == {
        "price": "19.90", "day": "2026-01-02", "when": "2026-01-02T03:04:05+00:00",
        "raw": "//5h",
    }  # fmt: skip
    out = tmp_path / "typed.parquet"
    run_crawlq("export", "--store", str(db), "--what", "items", "-o", str(out),
               "--item-type", f"{sales}:Sale")  # fmt: skip
    rows = pq.read_table(out).sort_by("page").to_pylist()
    assert [(r["price"], r["day"], r["when"], r["raw"]) for r in rows[:1]] == [
        ("19.90", datetime.date(2026, 1, 2), WHEN, b"\xff\xfea")
    ]
    assert len(rows) == PAGES


TYPES = """
import dataclasses


@dataclasses.dataclass
class Priced:
    title: str
    cost: float  # required: the pages' items have no such field


@dataclasses.dataclass
class Other:  # another spider's items: none of these fields
    sku: str | None = None
"""


def test_an_item_missing_a_required_field_gets_no_typed_row(
    site: str, spider: str, tmp_path: Path
) -> None:
    db = tmp_path / "pages.db"
    run_crawlq("crawl", f"{site}/a.html", "--store", str(db), *FAST, "--spider", spider)
    types = tmp_path / "types.py"
    types.write_text(TYPES)
    for name, why in [
        ("Priced", "field 'cost': missing or null, and not Optional"),
        ("Other", "none of the declared fields is in the item"),
    ]:
        out = tmp_path / f"{name}.parquet"
        proc = run_crawlq("export", "--store", str(db), "--what", "items", "-o", str(out),
                          "--item-type", f"{types}:{name}")  # fmt: skip
        assert pq.read_table(out).num_rows == 0  # no rows of NULLs
        assert proc.stderr.count(why) == PAGES, proc.stderr


def test_a_refused_items_table_leaves_no_redis_job(
    site: str, store: str, spider: str, jobs: tuple[str, list[str]]
) -> None:
    import redis

    from crawlq.frontier.redis import Keyspace

    redis_url, names = jobs
    names.append(f"test-{uuid.uuid4().hex[:12]}")
    schema = store.rsplit("search_path%3D", 1)[1]
    with psycopg.connect(store) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".t (other integer)')
    proc = run_crawlq(
        "crawl", f"{site}/a.html", "--store", store, "--frontier", redis_url,
        "--job", names[-1], "--spider", spider, "--items-table", "t", *FAST, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "other columns" in proc.stderr, proc.stderr
    client = redis.Redis.from_url(redis_url)
    try:  # README: checked before any store file, lock or job exists
        assert client.exists(Keyspace(names[-1]).job_info) == 0
        assert list(client.scan_iter(match=Keyspace(names[-1]).pattern())) == []
    finally:
        client.close()
