"""crawlq.items: typed items made dicts, validation of declared types, the dedup key."""

from __future__ import annotations

import dataclasses
from typing import Literal, Optional, TypedDict, Union

import attrs
import pydantic
import pytest

from crawlq.items import adapt, invalid, is_item, item_key


@dataclasses.dataclass
class D:
    a: int
    b: Optional[str] = None  # noqa: UP045 (the typing spelling is checked too)
    c: Union[int, list[int]] = 0  # noqa: UP007
    d: Literal["x", "y"] = "x"
    e: dict[str, float] = dataclasses.field(default_factory=dict)
    f: object = None  # anything


@attrs.define
class A:
    a: int


class P(pydantic.BaseModel):
    a: int


class T(TypedDict):
    a: int
    b: str


def test_is_item_and_adapt() -> None:
    assert is_item({}) and is_item(D(1)) and is_item(A(1)) and is_item(P(a=1))
    assert not is_item(D) and not is_item("s") and not is_item(1)
    assert adapt(D(1, "s")) == {"a": 1, "b": "s", "c": 0, "d": "x", "e": {}, "f": None}
    assert adapt(A(2)) == {"a": 2}
    assert adapt(P(a=3)) == {"a": 3}
    d = {"a": 1}
    assert adapt(d) is d
    with pytest.raises(TypeError):
        adapt("no")


@pytest.mark.parametrize(
    ("item", "why"),
    [
        (D(1), None),
        (D(True), "field a: expected int, got bool"),
        (D(1, 2), "field b: expected Optional[str], got int"),  # type: ignore[arg-type]
        (D(1, c=[1, 2]), None),
        (D(1, c=["1"]), "field c: expected Union[int, list[int]], got list"),  # type: ignore[list-item]
        (D(1, d="z"), "field d: expected one of ['x', 'y'], got 'z'"),  # type: ignore[arg-type]
        (D(1, e={"k": 1}), None),  # an int is a float
        (D(1, e={"k": "1"}), "field e: ['k']: expected float, got str"),  # type: ignore[dict-item]
        (D(1, f=object()), None),
        (A("1"), "field a: expected int, got str"),  # type: ignore[arg-type]
        (P(a=1), None),
    ],
)
def test_typed_items_are_checked_against_their_annotations(item: object, why: str | None) -> None:
    assert invalid(item) == (item, why)


def test_dicts_are_checked_against_the_declared_type() -> None:
    assert invalid({"a": 1, "b": "s"}, T)[1] is None
    assert invalid({"a": 1}, T)[1] == "field b: missing"
    assert invalid({"a": 1, "b": "s", "c": 0}, T)[1] == "field c: not a field of T"
    assert invalid({"a": "1"}, D)[1] == "field a: expected int, got str"
    assert invalid({"a": 1}, A)[1] is None
    converted, why = invalid({"a": "7"}, P)
    assert why is None and converted == P(a=7)
    assert invalid({"a": "x"}, P)[1] == (
        "field a: Input should be a valid integer, unable to parse string as an integer"
    )
    assert invalid({"anything": 1})[1] is None  # no declared type: any dict


def test_item_key_hashes_the_fields_values_in_order() -> None:
    key = item_key({"sku": "a", "shop": 1}, ["sku", "shop"])
    assert key is not None and len(key) == 20
    assert key == item_key({"shop": 1, "sku": "a", "other": 2}, ["sku", "shop"])
    assert key != item_key({"sku": "a", "shop": "1"}, ["sku", "shop"])
    assert key != item_key({"sku": "a", "shop": 1}, ["shop", "sku"])  # the order counts
    assert item_key({"sku": None}, ["sku"]) is None
    assert item_key({}, ["sku"]) is None
