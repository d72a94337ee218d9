"""`crawlq.items.schema`: the fields of the four kinds of item class, kinds, cells, names."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
from typing import Annotated, Any, NotRequired, Optional, TypedDict

import attrs
import pydantic
import pytest

from crawlq.errors import ConfigError
from crawlq.items.schema import (
    POSTGRES_TYPES,
    ItemField,
    ItemTable,
    WrongType,
    cell,
    column_kind,
    item_fields,
)

EXPECTED = (
    ItemField("name", str, False),
    ItemField("price", int, False),
    ItemField("rating", float, True),
    ItemField("tags", list[str], False),
)


@dataclasses.dataclass
class DataItem:
    name: str
    price: int
    rating: float | None
    tags: list[str]


@attrs.define
class AttrsItem:
    name: str
    price: int
    rating: Optional[float]  # noqa: UP045 (the old spelling is read too)
    tags: list[str]


class PydanticItem(pydantic.BaseModel):
    name: str
    price: int
    rating: float | None = None
    tags: list[str] = []


class DictItem(TypedDict):
    name: str
    price: int
    rating: NotRequired[float | None]
    tags: Annotated[list[str], "metadata"]


@pytest.mark.parametrize("cls", [DataItem, AttrsItem, PydanticItem, DictItem])
def test_item_fields_reads_each_kind_of_item_class(cls: type) -> None:
    assert item_fields(cls) == EXPECTED


def test_column_kinds_follow_the_table() -> None:
    kinds = {
        str: "text",
        int: "int",
        float: "float",
        bool: "bool",
        dt.datetime: "timestamp",
        dt.date: "date",
        decimal.Decimal: "decimal",
        bytes: "bytes",
        list[int]: "json",
        dict[str, Any]: "json",
        int | str: "json",
        Any: "json",
    }
    assert {a: column_kind(a) for a in kinds} == kinds
    assert [POSTGRES_TYPES[column_kind(a)] for a in (int, float, dt.datetime)] == [
        "bigint",
        "double precision",
        "timestamp with time zone",
    ]


def test_a_class_that_is_no_item_class_is_refused() -> None:
    class Plain:
        name: str

    with pytest.raises(ConfigError, match="not a dataclass, attrs class") as caught:
        item_fields(Plain)
    assert caught.value.name == "item_type"


def test_cells_convert_the_stored_json_forms_and_refuse_the_wrong_type() -> None:
    assert cell("timestamp", "2026-01-02T03:04:05Z") == dt.datetime(
        2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC
    )
    assert cell("date", "2026-01-02") == dt.date(2026, 1, 2)
    assert cell("decimal", "1.10") == decimal.Decimal("1.10")
    assert cell("float", 3) == 3.0
    assert cell("json", {"a": [1]}) == {"a": [1]}
    for kind, value in [("int", True), ("int", "1"), ("int", 2**63), ("bool", 1), ("text", 5)]:
        with pytest.raises(WrongType, match=f"expected {kind}"):
            cell(kind, value)


def test_table_and_field_names_that_cannot_be_identifiers_are_refused() -> None:
    with pytest.raises(ConfigError, match="empty name") as caught:
        ItemTable.of("", DataItem)
    assert caught.value.name == "items_table"
    with pytest.raises(ConfigError, match="at most 63") as caught:
        ItemTable.of("t" * 64, DataItem)
    assert caught.value.name == "items_table"
    Long = TypedDict("Long", {"x" * 64: int})  # type: ignore[misc]
    with pytest.raises(ConfigError, match="field 'xxxx") as caught:
        ItemTable.of("t", Long)
    assert caught.value.name == "item_type"

    class Taken(TypedDict):
        crawlq_url: str

    with pytest.raises(ConfigError, match="'crawlq_url'"):
        ItemTable.of("t", Taken)
    assert ItemTable.of("é" * 31, DataItem).name == "é" * 31  # 62 bytes: fits


def test_a_row_fills_missing_optional_fields_and_ignores_extra_keys() -> None:
    table = ItemTable.of("t", DataItem)
    assert table.row({"name": "n", "price": 1, "tags": [], "extra": 1}) == ["n", 1, None, []]
    with pytest.raises(WrongType, match="field 'price': missing"):
        table.row({"name": "n", "tags": []})
