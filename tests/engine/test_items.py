"""Items through whole crawls: typed items, validation, pipelines and item dedup.

The fault server answers ``/status/200`` and friends; each spider yields its items from
those pages, and the store is read back.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Literal, TypedDict

import attrs
import pydantic

from crawlq.engine.job import bind_job
from crawlq.frontier.redis import RedisFrontier
from crawlq.items import DropItem
from crawlq.settings import Settings
from crawlq.spider import Response, Spider

from .conftest import crawl


class Trail:
    """Each pipeline appends its name to the item's ``trail``; events are recorded."""

    events: ClassVar[list[str]] = []

    def open(self, spider: Spider) -> None:
        Trail.events.append(f"open {type(self).__name__} {spider.name}")

    def close(self) -> None:
        Trail.events.append(f"close {type(self).__name__}")

    def process_item(self, item: dict[str, Any], response: Response) -> Any:
        item.setdefault("trail", []).append(type(self).__name__)
        return item


class Enrich(Trail):
    def process_item(self, item: dict[str, Any], response: Response) -> Any:
        item["url"] = response.url
        return super().process_item(item, response)


class DropOdd(Trail):
    def process_item(self, item: dict[str, Any], response: Response) -> Any:
        if item["n"] % 2:
            raise DropItem("odd")
        return super().process_item(item, response)


class AsyncTag(Trail):
    async def open(self, spider: Spider) -> None:  # type: ignore[override]
        Trail.events.append("open AsyncTag")

    async def process_item(self, item: dict[str, Any], response: Response) -> Any:
        return super().process_item(item, response)


class NoFour(Trail):
    def process_item(self, item: dict[str, Any], response: Response) -> Any:
        return None if item["n"] == 4 else super().process_item(item, response)


class Numbers(Spider):
    name = "numbers"
    item_pipelines = (Enrich, DropOdd, AsyncTag)

    def parse(self, response: Response) -> Any:
        for n in range(6):
            yield {"n": n}


async def test_pipelines_drop_enrich_and_run_in_order_sync_and_async(db: Path, base: str) -> None:
    Trail.events.clear()
    seed = f"{base}/status/200"
    r = await crawl(db, [seed], Numbers, item_pipelines=[f"{__name__}:NoFour"])
    got = sorted((i.data["n"], i.data["url"], tuple(i.data["trail"])) for i in r.items)
    order = ("Enrich", "DropOdd", "AsyncTag", "NoFour")  # the spider's, then the setting's
    assert got == [(0, seed, order), (2, seed, order)]
    assert r.report.counters.dropped == {"DropOdd: odd": 3, "NoFour: dropped": 1}
    assert r.pages[seed].error is None
    opened = [e for e in Trail.events if e.startswith("open")]
    assert opened == [
        "open Enrich numbers",
        "open DropOdd numbers",
        "open AsyncTag",
        "open NoFour numbers",
    ]
    assert sorted(e for e in Trail.events if e.startswith("close")) == [
        "close AsyncTag", "close DropOdd", "close Enrich", "close NoFour"
    ]  # fmt: skip


class Boom:
    def process_item(self, item: Any, response: Response) -> Any:
        raise ValueError("no way")


async def test_a_failing_pipeline_is_a_spider_error_of_the_page(db: Path, base: str) -> None:
    seed = f"{base}/status/200"
    r = await crawl(db, [seed], Numbers, item_pipelines=[f"{__name__}:Boom"])
    assert r.items == []
    assert r.pages[seed].error == "spider_error: ValueError: pipeline Boom: no way"


@dataclasses.dataclass
class Book:
    title: str
    price: float
    tags: list[str] = dataclasses.field(default_factory=list)


@attrs.define
class Film:
    title: str
    year: int


class Song(pydantic.BaseModel):
    title: str
    plays: int


class Poem(TypedDict):
    title: str
    lines: int


class Typed(Spider):
    def parse(self, response: Response) -> Any:
        yield Book("b", 9.5, ["x"])
        yield Film("f", 1999)
        yield Song(title="s", plays=3)
        yield Poem(title="p", lines=14)


async def test_dataclass_attrs_pydantic_and_typeddict_items_are_stored_as_dicts(
    db: Path, base: str
) -> None:
    r = await crawl(db, [f"{base}/status/200"], Typed)
    assert sorted((i.index, i.data) for i in r.items) == [
        (0, {"title": "b", "price": 9.5, "tags": ["x"]}),
        (1, {"title": "f", "year": 1999}),
        (2, {"title": "s", "plays": 3}),
        (3, {"title": "p", "lines": 14}),
    ]
    assert r.report.counters.dropped == {}


@dataclasses.dataclass
class Sale:
    price: decimal.Decimal
    day: dt.date
    when: dt.datetime
    raw: bytes


class PydanticSale(pydantic.BaseModel):
    price: decimal.Decimal
    day: dt.date
    when: dt.datetime
    raw: bytes


SALE = (
    decimal.Decimal("19.90"),
    dt.date(2026, 1, 2),
    dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
)
SALE_JSON = {"price": "19.90", "day": "2026-01-02", "when": "2026-01-02T03:04:05+00:00"}


class Sales(Spider):
    """Decimal, date, datetime and bytes (UTF-8 and not) in every kind of item."""

    def parse(self, response: Response) -> Any:
        yield Sale(*SALE, b"\xff\xfe")
        yield PydanticSale(price=SALE[0], day=SALE[1], when=SALE[2], raw=b"\xff\xfe")
        yield PydanticSale(price=SALE[0], day=SALE[1], when=SALE[2], raw=b"\x00\x01")
        yield {"price": SALE[0], "day": SALE[1], "when": SALE[2], "raw": b"\xff\xfe"}


class DictSales(Spider):
    """Dict items only, no pipeline: the fast path that skips the item flow."""

    def parse(self, response: Response) -> Any:
        for raw in (b"\xff\xfe", b"\x00\x01"):
            yield {"price": SALE[0], "day": SALE[1], "when": SALE[2], "raw": raw}


async def test_decimal_date_datetime_and_bytes_items_are_stored_as_json_text(
    db: Path, base: str
) -> None:
    seed = f"{base}/status/200"
    r = await crawl(db, [seed], Sales)
    assert r.pages[seed].error is None
    assert [i.data for i in sorted(r.items, key=lambda i: i.index)] == [
        {**SALE_JSON, "raw": "//4="},  # base64 of b"\xff\xfe" (RFC 4648), never UTF-8
        {**SALE_JSON, "raw": "//4="},
        {**SALE_JSON, "raw": "AAE="},  # UTF-8 bytes are base64 too, never text
        {**SALE_JSON, "raw": "//4="},
    ]
    db.unlink()
    r = await crawl(db, [seed], DictSales)
    assert r.pages[seed].error is None
    assert sorted(i.data["raw"] for i in r.items) == ["//4=", "AAE="]


class BadItems(Spider):
    """A good and a bad dataclass item, then a pydantic model made from bad data."""

    def parse(self, response: Response) -> Iterable[Any]:
        yield Book("good", 1)
        yield Book("bad", "cheap")  # type: ignore[arg-type]
        yield Song(title="s", plays="many")  # type: ignore[arg-type]  # raises ValidationError: ends the callback


async def test_bad_typed_items_are_recorded_with_field_and_reason_not_stored(
    db: Path, base: str
) -> None:
    seed = f"{base}/status/200"
    r = await crawl(db, [seed], BadItems)
    assert [i.data for i in r.items] == [{"title": "good", "price": 1, "tags": []}]
    assert r.pages[seed].error is None  # a bad item is not a failed page
    dropped = r.report.counters.dropped
    assert dropped == {
        "validation: invalid: field price: expected float, got str": 1,
        "validation: invalid: field plays: Input should be a valid integer, unable to parse "
        "string as an integer": 1,
    }


class Offer(pydantic.BaseModel):
    sku: str
    price: int
    kind: Literal["new", "used"] = "new"


class Dicts(Spider):
    item_type = Offer

    def parse(self, response: Response) -> Any:
        yield {"sku": "a", "price": "12"}  # converted by the model
        yield {"sku": "b", "price": "twelve"}
        yield {"sku": "c", "price": 1, "kind": "broken"}


async def test_dict_items_are_validated_against_the_spiders_item_type(db: Path, base: str) -> None:
    r = await crawl(db, [f"{base}/status/200"], Dicts)
    assert [i.data for i in r.items] == [{"sku": "a", "price": 12, "kind": "new"}]
    assert set(r.report.counters.dropped) == {
        "validation: invalid: field price: Input should be a valid integer, unable to parse "
        "string as an integer",
        "validation: invalid: field kind: Input should be 'new' or 'used'",
    }


class SameSku(Spider):
    def parse(self, response: Response) -> Any:
        if response.url.endswith("/status/200"):
            yield response.follow("/status/201")
            yield {"sku": "x", "from": 200}
            yield {"sku": "y", "from": 200}
            yield {"sku": "y", "from": 200}  # the same key twice on one page
        else:
            yield {"sku": "x", "from": 201}
            yield {"sku": "z", "from": 201}
            yield {"from": 201}  # no key: kept


async def test_item_dedup_by_key_across_pages_of_the_job(db: Path, base: str) -> None:
    r = await crawl(db, [f"{base}/status/200"], SameSku, item_dedup_key=["sku"])
    got = sorted((i.data.get("sku", ""), i.data["from"]) for i in r.items)
    assert got == [("", 201), ("x", 200), ("y", 200), ("z", 201)]
    assert r.report.counters.dropped == {"item_dedup: duplicate_item": 2}


async def test_a_pipeline_in_a_jobs_redis_settings_is_never_loaded(
    redis_url: str, job: str
) -> None:
    """Pipelines are code: a worker takes them from its own configuration only."""
    f = await RedisFrontier.open(redis_url, job, create=True)
    try:
        stored = {"item_pipelines": ["evil:Pipeline"], "item_type": "evil:T"}
        stored["item_dedup_key"] = ["sku"]  # not code: a job's setting every worker adopts
        await f.job_settings(stored)
        own = Settings.build(cli={"frontier": redis_url, "job": job}, env={})
        for trusted in (False, True):
            joined = await bind_job(f, replace(own, trust_job_code=trusted), create=False)
            assert joined.item_pipelines == ()
            assert joined.item_type is None
            assert joined.item_dedup_key == ("sku",)
    finally:
        await f.close()
