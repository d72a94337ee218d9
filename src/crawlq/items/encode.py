"""How an item's values become JSON: `jsonable`, the one rule every store and sink follows.

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
import json
import math
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["Unserialisable", "jsonable"]


class Unserialisable(ValueError):
    """An item value JSON cannot hold; raised by `jsonable`, the message names field and type."""


def jsonable(data: dict[str, Any], fallback: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """``data`` with its values made JSON by the module's rules (``data`` itself if they are).

    Args:
        data: An item's fields (`crawlq.items.adapt` made it a dict).
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
