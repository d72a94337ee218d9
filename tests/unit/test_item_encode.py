"""How item values become JSON (`crawlq.items.adapt`) and come back in the typed sinks."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from typing import Any, TypedDict

import attrs
import pydantic
import pytest

from crawlq.items import Unserialisable, adapt, jsonable
from crawlq.items.schema import ItemTable, WrongType, cell, field_cells, item_fields

WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=dt.UTC)
DAY = dt.date(2026, 1, 2)
PRICE = decimal.Decimal("19.90")
RAW = b"\xff\xfe\x00"  # not UTF-8
STORED = {
    "price": "19.90",
    "day": "2026-01-02",
    "when": "2026-01-02T03:04:05.600000+00:00",
    "raw": "//4A",
}


@dataclasses.dataclass
class DataRow:
    price: decimal.Decimal
    day: dt.date
    when: dt.datetime
    raw: bytes


@attrs.define
class AttrsRow:
    price: decimal.Decimal
    day: dt.date
    when: dt.datetime
    raw: bytes


class PydanticRow(pydantic.BaseModel):
    price: decimal.Decimal
    day: dt.date
    when: dt.datetime
    raw: bytes


class DictRow(TypedDict):
    price: decimal.Decimal
    day: dt.date
    when: dt.datetime
    raw: bytes


class Colour(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    "item",
    [
        DataRow(PRICE, DAY, WHEN, RAW),
        AttrsRow(PRICE, DAY, WHEN, RAW),
        PydanticRow(price=PRICE, day=DAY, when=WHEN, raw=RAW),
        DictRow(price=PRICE, day=DAY, when=WHEN, raw=RAW),
    ],
    ids=["dataclass", "attrs", "pydantic", "typeddict"],
)
def test_every_kind_of_item_stores_decimal_date_datetime_and_bytes_losslessly(item: Any) -> None:
    data = adapt(item)
    assert data == STORED
    assert json.loads(json.dumps(data, allow_nan=False)) == STORED
    cls = DictRow if isinstance(item, dict) else type(item)  # a TypedDict is a dict
    cells = field_cells(item_fields(cls), data)  # what a typed sink writes
    assert cells == [PRICE, DAY, WHEN, RAW]


def test_utf8_bytes_of_a_pydantic_item_are_base64_not_text() -> None:
    item = PydanticRow(price=PRICE, day=DAY, when=WHEN, raw=b"\x00\x01")
    assert adapt(item)["raw"] == "AAE="
    assert cell("bytes", "AAE=") == b"\x00\x01"


def test_the_other_rules_uuid_enum_sets_tuples_time_and_nesting() -> None:
    key = uuid.UUID(int=1)
    data = jsonable(
        {
            "id": key,
            "colour": Colour.RED,
            "tags": {"b", "a"},
            "pair": (1, DAY),
            "at": dt.time(12, 30),
            "nested": {"n": [PRICE], 3: "int key"},
        }
    )
    assert data == {
        "id": str(key),
        "colour": "red",
        "tags": ["a", "b"],
        "pair": [1, "2026-01-02"],
        "at": "12:30:00",
        "nested": {"n": ["19.90"], "3": "int key"},
    }


def test_a_plain_json_dict_is_returned_as_it_is() -> None:
    item = {"a": [1, 2.5, "x"], "b": None}
    assert jsonable(item) is item
    assert adapt(item) is item


class Opaque:
    pass


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ({"x": Opaque()}, "field 'x': Object of type Opaque is not JSON serializable"),
        ({"x": [float("nan")]}, "field 'x': nan is not a JSON number"),
        ({"x": decimal.Decimal("Infinity")}, "field 'x': Decimal Infinity is not a JSON number"),
    ],
)
def test_what_json_cannot_hold_is_unserialisable_naming_the_field(item: Any, why: str) -> None:
    with pytest.raises(Unserialisable, match=why):
        adapt(item)


class WithUrl(pydantic.BaseModel):
    link: pydantic.HttpUrl
    span: dt.timedelta


def test_a_pydantic_items_own_types_are_written_as_pydantic_writes_json() -> None:
    item = WithUrl(link="https://example.com/a", span=dt.timedelta(hours=1))  # type: ignore[arg-type]
    assert adapt(item) == {"link": "https://example.com/a", "span": "PT1H"}


class Fails(pydantic.BaseModel):
    n: int

    @pydantic.field_serializer("n")
    def _n(self, value: int) -> int:
        raise RuntimeError("no")


def test_a_serializer_that_raises_is_unserialisable_not_an_internal_error() -> None:
    with pytest.raises(Unserialisable, match=r"Fails: .*no"):
        adapt(Fails(n=1))


def test_bytes_cells_refuse_text_that_is_not_base64() -> None:
    with pytest.raises(WrongType, match="expected bytes, got str"):
        cell("bytes", "not base64!")


@dataclasses.dataclass
class Priced:
    name: str
    price: float
    note: str | None = None


def test_a_row_needs_its_required_fields_and_at_least_one_field() -> None:
    table = ItemTable.of("t", Priced)
    assert table.row({"name": "n", "price": 1}) == ["n", 1.0, None]
    with pytest.raises(WrongType, match="field 'price': missing or null"):
        table.row({"name": "n"})
    only_optional = item_fields(TypedDict("Note", {"note": str | None}))  # type: ignore[operator]
    with pytest.raises(WrongType, match="none of the declared fields"):
        field_cells(only_optional, {"title": "another spider's item"})
