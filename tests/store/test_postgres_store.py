"""PostgreSQL-only behaviour: schemas and their versions, connections, outages, NUL text."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from crawlq.errors import ConfigError, StoreError, StoreUnavailable
from crawlq.records import DeadRecord, ItemRecord, PageRecord
from crawlq.store import ResultBatch, open_store
from tests.services import PrivatePostgres, free_port

psycopg = pytest.importorskip("psycopg")

from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from crawlq.store.postgres import PostgresStore  # noqa: E402
from crawlq.store.postgres import schema as postgres_schema  # noqa: E402
from crawlq.store.postgres.schema import SCHEMA_VERSION  # noqa: E402


def page(n: int, **changes: Any) -> PageRecord:
    url = f"https://example.com/{n}"
    fields: dict[str, Any] = {
        "fingerprint": n.to_bytes(20, "big"),
        "url": url,
        "final_url": url,
        "status": 200,
        "content_type": "text/html",
        "depth": 0,
        "title": None,
        "fetched_at": 1_800_000_000.0 + n,
        "size_bytes": 10,
        "elapsed_s": 0.1,
        "attempt": 1,
    }
    return PageRecord(**{**fields, **changes})


def item(n: int, index: int = 0, **data: Any) -> ItemRecord:
    url = f"https://example.com/{n}"
    return ItemRecord(n.to_bytes(20, "big"), index, url, "docs", data or {"n": n}, 1.0 + n)


def dead(n: int) -> DeadRecord:
    url = f"https://example.com/{n}"
    return DeadRecord(n.to_bytes(20, "big"), url, "timeout", "read timeout", 4, 0, float(n))


def pages_batch(numbers: range) -> ResultBatch:
    return ResultBatch(pages=[page(n) for n in numbers], items=[item(n) for n in numbers])


def in_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


async def query(url: str, statement: str | sql.Composed, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(statement, params or None)
        return await cur.fetchall() if cur.description else []


def qualified(schema: str, table: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))


# Schema and versions.


async def test_first_open_creates_the_versioned_schema(postgres_url: str, schema: str) -> None:
    store = await PostgresStore.open(postgres_url, schema=schema)
    await store.close()
    tables = await query(
        postgres_url,
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1",
        schema,
    )
    assert [t for (t,) in tables] == [
        "dead_letters",
        "filtered",
        "items",
        "outcomes",
        "pages",
        "store_meta",
    ]
    meta = qualified(schema, "store_meta")
    version = await query(postgres_url, sql.SQL("SELECT value FROM {}").format(meta))
    assert version == [(str(SCHEMA_VERSION),)]
    store = await PostgresStore.open(postgres_url, schema=schema)  # reopening keeps it all
    try:
        await store.write(pages_batch(range(3)))
    finally:
        await store.close()
    store = await PostgresStore.open(postgres_url, schema=schema)
    try:
        assert (await store.counts()).pages == 3
    finally:
        await store.close()


async def test_the_schema_can_come_from_the_url(postgres_url: str, schema: str) -> None:
    for scheme in ("postgresql://", "postgres://"):
        url = in_schema(postgres_url.replace("postgresql://", scheme, 1), schema)
        store = await open_store(url)
        try:
            assert isinstance(store, PostgresStore)
            assert store.schema == schema
            await store.write(pages_batch(range(2)))
        finally:
            await store.close()
    rows = await query(
        postgres_url, sql.SQL("SELECT count(*) FROM {}").format(qualified(schema, "pages"))
    )
    assert rows == [(2,)]


async def test_a_newer_schema_is_refused_naming_url_and_versions(
    postgres_url: str, schema: str
) -> None:
    await (await PostgresStore.open(postgres_url, schema=schema)).close()
    meta = qualified(schema, "store_meta")
    await query(postgres_url, sql.SQL("UPDATE {} SET value = '999'").format(meta))
    params = conninfo_to_dict(postgres_url)
    secret = params.get("password") or "s3cret"
    with_password = make_conninfo(postgres_url, password=secret)
    with pytest.raises(StoreError) as info:
        await PostgresStore.open(with_password, schema=schema)
    message = str(info.value)
    assert f"schema version 999, newer than the {SCHEMA_VERSION} this crawlq supports" in message
    assert f"{params.get('host')}:{params.get('port') or 5432}/{params.get('dbname')}" in message
    assert schema in message
    assert str(secret) not in message


async def test_an_empty_schema_is_version_0_and_brought_to_the_latest(
    postgres_url: str, schema: str
) -> None:
    await query(postgres_url, sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    store = await PostgresStore.open(postgres_url, schema=schema)
    await store.close()
    meta = qualified(schema, "store_meta")
    version = await query(postgres_url, sql.SQL("SELECT value FROM {}").format(meta))
    assert version == [(str(SCHEMA_VERSION),)]


async def test_a_new_migration_step_runs_once_on_an_older_schema(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await PostgresStore.open(postgres_url, schema=schema)
    await store.write(pages_batch(range(5)))
    await store.close()

    runs: list[int] = []

    async def to_v2(conn: Any) -> None:  # what a next version would be: one function
        runs.append(1)
        await conn.execute("ALTER TABLE pages ADD COLUMN lang text")
        await conn.execute("UPDATE pages SET lang = 'en'")

    monkeypatch.setattr(postgres_schema, "MIGRATIONS", (*postgres_schema.MIGRATIONS, to_v2))
    for _ in range(2):  # the second open finds version 2 and runs nothing
        store = await PostgresStore.open(postgres_url, schema=schema)
        try:
            assert (await store.counts()).pages == 5
        finally:
            await store.close()
    assert runs == [1]
    meta = qualified(schema, "store_meta")
    expected = [(str(SCHEMA_VERSION + 1),)]
    assert await query(postgres_url, sql.SQL("SELECT value FROM {}").format(meta)) == expected
    langs = await query(
        postgres_url, sql.SQL("SELECT DISTINCT lang FROM {}").format(qualified(schema, "pages"))
    )
    assert langs == [("en",)]


async def test_a_version_1_schema_gains_the_warc_columns(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:  # a schema made by crawlq at version 1
        patch.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:1])
        await (await PostgresStore.open(postgres_url, schema=schema)).close()
    await query(
        postgres_url,
        sql.SQL(
            "INSERT INTO {} (fingerprint, url, final_url, status, content_type, depth,"
            " fetched_at, size_bytes, elapsed_s, attempt, spider)"
            " VALUES (%s, 'https://e.com/1', 'https://e.com/1', 200, '', 0, 1, 1, 0.1, 1, 'd')"
        ).format(qualified(schema, "pages")),
        page(1).fingerprint,
    )
    store = await PostgresStore.open(postgres_url, schema=schema)
    try:
        [old] = [p async for p in store.pages()]
        assert (old.url, old.warc_file, old.warc_offset) == ("https://e.com/1", None, None)
        archived = page(2, warc_file="crawlq-x.warc.gz", warc_offset=5 * 2**32)
        await store.write(ResultBatch(pages=[archived]))
        assert [p async for p in store.pages()][-1] == archived
    finally:
        await store.close()
    meta = qualified(schema, "store_meta")
    expected = [(str(SCHEMA_VERSION),)]
    assert await query(postgres_url, sql.SQL("SELECT value FROM {}").format(meta)) == expected


async def test_a_version_2_schema_gains_canonical_url(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:  # a schema made by crawlq at version 2
        patch.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:2])
        store = await PostgresStore.open(postgres_url, schema=schema)
        await store.close()
    await query(
        postgres_url,
        sql.SQL(
            "INSERT INTO {} (fingerprint, url, final_url, status, content_type, depth,"
            " fetched_at, size_bytes, elapsed_s, attempt, spider)"
            " VALUES (%s, 'https://e.com/1', 'https://e.com/1', 200, '', 0, 1, 1, 0.1, 1, 'd')"
        ).format(qualified(schema, "pages")),
        page(1).fingerprint,
    )
    read_only = await PostgresStore.open(postgres_url, schema=schema, read_only=True)
    try:
        assert [p.canonical_url async for p in read_only.pages()] == [None]
    finally:
        await read_only.close()
    store = await PostgresStore.open(postgres_url, schema=schema)
    try:
        canonical = page(2, canonical_url="https://e.com/the-one")
        await store.write(ResultBatch(pages=[canonical]))
        assert [p async for p in store.pages()][-1] == canonical
    finally:
        await store.close()
    meta = qualified(schema, "store_meta")
    expected = [(str(SCHEMA_VERSION),)]
    assert await query(postgres_url, sql.SQL("SELECT value FROM {}").format(meta)) == expected


async def test_a_version_5_schema_is_migrated_its_rows_counting_for_no_job(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawlq.store.postgres import store as postgres

    with monkeypatch.context() as patch:  # a schema made by crawlq at version 5
        patch.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:5])
        patch.setattr(postgres, "SCHEMA_VERSION", 5)
        await (await PostgresStore.open(postgres_url, schema=schema)).close()
    for n in (1, 2):  # what that crawlq wrote: no job column
        await query(
            postgres_url,
            sql.SQL(
                "INSERT INTO {} (fingerprint, url, final_url, status, content_type, depth,"
                " fetched_at, size_bytes, elapsed_s, attempt, spider)"
                " VALUES (%s, %s, %s, 200, '', 0, %s, 1, 0.1, 1, 'd')"
            ).format(qualified(schema, "pages")),
            page(n).fingerprint,
            page(n).url,
            page(n).url,
            page(n).fetched_at,
        )
    read_only = await PostgresStore.open(postgres_url, schema=schema, read_only=True)
    try:  # read as it is
        assert (await read_only.counts()).pages == 2
        assert (await read_only.counts(job="docs")).pages == 0
    finally:
        await read_only.close()
    store = await PostgresStore.open(postgres_url, schema=schema)
    try:
        assert [p.url async for p in store.pages()] == [page(1).url, page(2).url]  # kept
        await store.write(ResultBatch(pages=[page(3)], dead=[dead(4)], job="docs"))
        docs = await store.counts(job="docs")
        assert (docs.pages, docs.dead) == (1, 1)
        total = await store.counts()
        assert (total.pages, total.dead) == (3, 1)  # the old rows count in the total only
    finally:
        await store.close()
    meta = qualified(schema, "store_meta")
    expected = [(str(SCHEMA_VERSION),)]
    assert await query(postgres_url, sql.SQL("SELECT value FROM {}").format(meta)) == expected
    jobs = await query(
        postgres_url,
        sql.SQL("SELECT job FROM {} ORDER BY fetched_at").format(qualified(schema, "pages")),
    )
    assert jobs == [(None,), (None,), ("docs",)]
    indexes = await query(
        postgres_url,
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND indexname LIKE '%%job'",
        schema,
    )
    assert sorted(name for (name,) in indexes) == ["dead_letters_job", "filtered_job", "pages_job"]


async def test_a_failing_migration_step_leaves_the_old_version(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await (await PostgresStore.open(postgres_url, schema=schema)).close()

    async def broken(conn: Any) -> None:
        await conn.execute("ALTER TABLE pages ADD COLUMN lang text")
        await conn.execute("SELECT no_such_function()")

    monkeypatch.setattr(postgres_schema, "MIGRATIONS", (*postgres_schema.MIGRATIONS, broken))
    with pytest.raises(StoreError, match="no_such_function"):
        await PostgresStore.open(postgres_url, schema=schema)
    meta = qualified(schema, "store_meta")
    expected = [(str(SCHEMA_VERSION),)]
    assert await query(postgres_url, sql.SQL("SELECT value FROM {}").format(meta)) == expected
    columns = await query(
        postgres_url,
        "SELECT 1 FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = 'pages' AND column_name = 'lang'",
        schema,
    )
    assert columns == []  # the half-done step was rolled back with its transaction


async def test_workers_opening_a_new_schema_together_create_it_once(
    postgres_url: str, schema: str
) -> None:
    stores = await asyncio.gather(
        *(PostgresStore.open(postgres_url, schema=schema) for _ in range(6))
    )
    try:
        await asyncio.gather(
            *(s.write(pages_batch(range(i, i + 10))) for i, s in enumerate(stores))
        )
        assert (await stores[0].counts()).pages == 15
    finally:
        for s in stores:
            await s.close()


async def test_tables_crawlq_did_not_make_are_not_adopted(postgres_url: str, schema: str) -> None:
    await query(postgres_url, sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    await query(postgres_url, sql.SQL("CREATE TABLE {} (x int)").format(qualified(schema, "pages")))
    with pytest.raises(StoreError, match='"pages" already exists'):
        await PostgresStore.open(postgres_url, schema=schema)


# Connections and failures.


async def test_an_unreachable_server_is_unavailable_naming_host_and_port() -> None:
    port = free_port()  # bound then released: nothing listens there
    url = f"postgresql://crawl:s3cret@127.0.0.1:{port}/crawl"
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}") as info:
        await open_store(url)
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://crawl:s3cret@[::1/crawl",
        "postgresql://crawl:s3cret@127.0.0.1/crawl?no_such_param=1",
        "postgresql://crawl:s3cret@127.0.0.1:port/crawl",
    ],
)
async def test_a_malformed_url_is_a_config_error_without_the_password(url: str) -> None:
    with pytest.raises(ConfigError, match="invalid") as info:
        await open_store(url)
    assert info.value.name == "store"
    assert "s3cret" not in str(info.value)


async def test_a_write_cut_off_midway_leaves_nothing(postgres_url: str, schema: str) -> None:
    """The server ends our session while the write waits on a lock: nothing is half-written."""
    app = f"crawlq-{schema}"  # names our sessions among any others on the server
    store = await PostgresStore.open(
        make_conninfo(postgres_url, application_name=app), schema=schema
    )
    blocker = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
    try:
        await store.write(ResultBatch(pages=[page(1)]))
        outcomes = qualified(schema, "outcomes")
        await blocker.execute("BEGIN")  # hold the row lock of the last fingerprint
        await blocker.execute(
            sql.SQL("SELECT 1 FROM {} WHERE fingerprint = %s FOR UPDATE").format(outcomes),
            (page(1).fingerprint,),
        )
        # Fingerprints 0 and 2..9 are claimed first or after 1; the write stops at 1.
        write = asyncio.create_task(store.write(pages_batch(range(10))))
        for _ in range(100):
            waiting = await query(
                postgres_url,
                "SELECT pid FROM pg_stat_activity"
                " WHERE application_name = %s AND wait_event_type = 'Lock'",
                app,
            )
            if waiting:
                break
            await asyncio.sleep(0.05)
        assert len(waiting) == 1
        await query(postgres_url, "SELECT pg_terminate_backend(%s)", waiting[0][0])
        with pytest.raises(StoreUnavailable, match="terminat"):
            await write
        await blocker.execute("ROLLBACK")
        assert (await store.counts()).pages == 1  # reconnected; page 0 was not kept
        await store.write(pages_batch(range(10)))
        counts = await store.counts()
        assert (counts.pages, counts.items) == (10, 10)
    finally:
        await blocker.close()
        await store.close()


async def test_opposite_writers_of_the_same_fingerprints_leave_one_outcome_each(
    postgres_url: str, schema: str
) -> None:
    """Two workers write the same URLs as pages and as dead letters at once (a re-delivered
    lease): the row lock on ``outcomes`` keeps exactly one outcome per fingerprint, and the
    common lock order keeps them out of deadlocks."""
    first = await PostgresStore.open(postgres_url, schema=schema)
    second = await PostgresStore.open(postgres_url, schema=schema)
    try:
        for round_ in range(10):
            a = range(200)
            b = range(200, 400)
            one = ResultBatch(pages=[page(n) for n in a], dead=[dead(n) for n in b])
            two = ResultBatch(pages=[page(n) for n in b], dead=[dead(n) for n in a])
            if round_ % 2:
                one, two = two, one
            await asyncio.gather(first.write(one), second.write(two))
            counts = await first.counts()
            assert counts.settled == 400, counts
            assert counts.pages + counts.dead == 400
    finally:
        await first.close()
        await second.close()


async def test_nul_characters_are_stored_as_replacement_characters(
    postgres_url: str, schema: str
) -> None:
    store = await PostgresStore.open(postgres_url, schema=schema)
    try:
        batch = ResultBatch(
            pages=[page(1, title="a\x00b", error="e\x00")],
            items=[item(1, text="x\x00y", nested={"k\x00": ["\x00"]}, raw="\\u0000")],
            dead=[DeadRecord((2).to_bytes(20, "big"), "https://e.com/2", "r", "d\x00", 1, 0, 2.0)],
        )
        await store.write(batch)
        [stored] = [p async for p in store.pages()]
        assert (stored.title, stored.error) == ("a\ufffdb", "e\ufffd")
        [stored_item] = [i async for i in store.items()]
        assert stored_item.data == {
            "text": "x\ufffdy",
            "nested": {"k\ufffd": ["\ufffd"]},
            "raw": "\\u0000",
        }
        assert [d.detail async for d in store.dead()] == ["d\ufffd"]
    finally:
        await store.close()


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.cleanup()


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[PostgresStore]:
    store = await PostgresStore.open(url, connect_timeout_s=2)
    try:
        yield store
    finally:
        await store.close()


async def test_a_server_restart_and_an_outage_are_survived(
    private_postgres: PrivatePostgres,
) -> None:
    server = private_postgres
    async with opened(server.url) as store:
        await store.write(pages_batch(range(100)))

        # Restarted between two writes: the next write reconnects by itself.
        await asyncio.to_thread(server.stop)
        await asyncio.to_thread(server.start)
        await store.write(pages_batch(range(100, 200)))

        # Down during a write: unavailable, nothing lost on our side, and back after a start.
        await asyncio.to_thread(server.stop)
        later = pages_batch(range(200, 300))
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{server.port}"):
            await store.write(later)
        assert time.monotonic() - started < 10
        with pytest.raises(StoreUnavailable):
            await store.counts()
        await asyncio.to_thread(server.start)
        await store.write(later)
        await store.write(pages_batch(range(150, 250)))  # re-delivered: overwritten

        counts = await store.counts()
        assert (counts.pages, counts.items) == (300, 300)
        fingerprints = [p.fingerprint async for p in store.pages()]
        assert len(fingerprints) == len(set(fingerprints)) == 300
