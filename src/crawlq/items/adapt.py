"""Items made plain: typed items to dicts (`adapt`), values to JSON (`jsonable`), the dedup key.

itemadapter is imported on the first value that is not a dict (it imports pydantic, attrs
and their kin when they are installed: ~50 ms and ~8 MB per process), so a crawl of dict
items, or of none, never loads it.

How an item's values become JSON: `jsonable`, the one rule every store and sink follows.
The stores keep an item as JSON (SQLite text, PostgreSQL ``jsonb``, export lines), so a
value JSON has no type for is written as text or a list, losslessly where it can be:

* ``datetime``, ``date``, ``time``: ISO 8601 text (``isoformat()``),
  ``"2024-05-01T12:00:00+00:00"``, ``"2024-05-01"``, ``"12:00:00"``; a naive datetime has
  no offset (a typed sink reads it as UTC);
* ``Decimal``: its exact text, ``"19.90"`` (not a float: nothing is rounded);
* ``bytes``, ``bytearray``: standard base64 with padding (RFC 4648 section 4), so bytes
  ``ff fe`` are ``"//4="``; never decoded as UTF-8;
* ``UUID``: its text, ``"12345678-1234-5678-1234-567812345678"``;
* ``Enum``: its ``value``, made JSON by these same rules;
* ``set``, ``frozenset``, ``tuple``: a list (a set in sorted order when its members sort).

Anything else JSON cannot hold (another object; a float or Decimal NaN or infinity, which
RFC 8259 has no number for) raises `Unserialisable`; the parse step makes that a spider
error of the page (``UnserialisableItem``), never a lost page. A typed sink turns the text
back into the declared field's type (`crawlq.items.schema.cell`: ISO text to a datetime or
date, text to a Decimal, base64 to bytes), so its columns hold the real values.

A dict item that is already plain JSON (the usual case) costs one ``json.dumps`` and is
returned as it is, not copied.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import hashlib
import json
import math
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from itemadapter import ItemAdapter

__all__ = ["Unserialisable", "adapt", "is_item", "item_key", "jsonable"]


def is_item(value: object) -> bool:
    """True for a value a callback may yield as an item.

    A ``dict`` (a ``TypedDict`` is one), a dataclass instance, an attrs instance or a
    pydantic model (itemadapter's ``ItemAdapter.is_item``); not a class. A
    `crawlq.request.CrawlRequest` is a dataclass too: callers tell it apart first.
    """
    if isinstance(value, dict):
        return True
    return not isinstance(value, type) and _adapter().is_item(value)


def adapt(item: object) -> dict[str, Any]:
    """The item as the plain ``dict`` of JSON values the stores keep.

    A dict whose values are JSON already is returned as it is (not copied). A dataclass,
    attrs class or pydantic model becomes ``{field: value}`` with nested items made dicts
    too (itemadapter's ``ItemAdapter.asdict``; a pydantic model through
    ``model_dump(mode="python")``, so a ``bytes`` field is never decoded as UTF-8). Then the
    values become JSON by `jsonable` (datetime to ISO 8601 text, Decimal
    to text, bytes to base64...); a pydantic model's other values (``HttpUrl``, ``Path``...)
    as pydantic writes them in JSON.

    Raises:
        TypeError: ``item`` is not an item (`is_item`).
        Unserialisable: A value JSON cannot hold, or the item's own serialisation (a
            pydantic serializer, an attrs field) raised; the message says which.
    """
    if isinstance(item, dict):
        return jsonable(item)
    if not is_item(item):
        raise TypeError(f"{type(item).__name__} is not an item")
    try:
        dump = getattr(item, "model_dump", None)
        if callable(dump):  # pydantic v2: its own serialisation (aliases aside) of nested models
            out = dump(mode="python")
            if isinstance(out, dict):
                return jsonable(out, _pydantic_json())
        return jsonable(dict(_adapter()(item).asdict()))
    except Unserialisable:
        raise
    except Exception as exc:  # user code (a serializer, a property) must not lose the page
        raise Unserialisable(f"{type(item).__name__}: {type(exc).__name__}: {exc}") from exc


def _pydantic_json() -> Callable[[Any], Any]:
    """The JSON form pydantic gives of one value (``pydantic_core.to_jsonable_python``)."""
    from pydantic_core import to_jsonable_python

    return to_jsonable_python


def _adapter() -> type[ItemAdapter]:
    """The `ItemAdapter` class of itemadapter, imported on first use (module docstring)."""
    from itemadapter import ItemAdapter

    return ItemAdapter


def item_key(item: dict[str, Any], fields: Sequence[str]) -> bytes | None:
    """The 20-byte key of item dedup: SHA-1 of the JSON of the ``fields``' values, in order.

    Values are hashed, never kept: shared state (Redis) holds only this digest. ``1`` and
    ``"1"`` are different keys; ``1`` and ``1.0`` too (JSON text). None when a field is
    missing or None: such an item is not deduplicated.
    """
    values = []
    for name in fields:
        value = item.get(name)
        if value is None:
            return None
        values.append(value)
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode(), usedforsecurity=False).digest()


# -- item values as JSON --------------------------------------------------------------------


class Unserialisable(ValueError):
    """An item value JSON cannot hold; raised by `jsonable`, the message names field and type."""


def jsonable(data: dict[str, Any], fallback: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """``data`` with its values made JSON by the module's rules (``data`` itself if they are).

    Args:
        data: An item's fields (`adapt` made it a dict).
        fallback: Called with a value none of the rules knows, returns its JSON form (a
            pydantic model's items pass pydantic's own, for its ``HttpUrl`` and kin);
            None: such a value is `Unserialisable`.

    Returns:
        A dict that ``json.dumps(..., allow_nan=False)`` accepts.

    Raises:
        Unserialisable: A value (at any depth) fits no rule, or is a NaN or infinite float;
            the message names the top-level field and the value's type, never the value.
    """
    try:
        json.dumps(data, allow_nan=False)
        return data
    except (TypeError, ValueError):
        pass
    out: dict[str, Any] = {}
    for key, value in data.items():
        try:
            out[_key(key)] = _value(value, fallback)
        except (TypeError, ValueError) as exc:
            raise Unserialisable(f"field {str(key)[:80]!r}: {exc}") from None
    return out


def _key(key: object) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, int | float | bool):
        return json.dumps(key)  # as json.dumps writes such a key
    made = _value(key, None)
    if isinstance(made, str):
        return made
    raise TypeError(f"a key of type {type(key).__name__} cannot be a JSON object key")


def _value(value: Any, fallback: Callable[[Any], Any] | None) -> Any:
    if value is None or isinstance(value, str | bool | int):
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number (RFC 8259)")
        return value
    if isinstance(value, dict):
        return {_key(k): _value(v, fallback) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_value(v, fallback) for v in value]
    if isinstance(value, set | frozenset):
        members = [_value(v, fallback) for v in value]
        try:
            return sorted(members)
        except TypeError:
            return members
    scalar = _scalar(value)
    if scalar is not _NO:
        return scalar
    if isinstance(value, enum.Enum):
        return _value(value.value, fallback)
    if fallback is not None:
        return _value(fallback(value), None)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_NO = object()


def _scalar(value: object) -> object:
    """The JSON text of a datetime, date, time, Decimal, bytes or UUID; else `_NO`."""
    if isinstance(value, dt.date | dt.time):  # a datetime is a date
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError(f"Decimal {value} is not a JSON number (RFC 8259)")
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    return _NO
