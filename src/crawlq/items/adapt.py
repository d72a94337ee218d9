"""Typed items to plain dicts of JSON values (`adapt`), and the key of item dedup (`item_key`).

itemadapter is imported on the first value that is not a dict (it imports pydantic, attrs
and their kin when they are installed: ~50 ms and ~8 MB per process), so a crawl of dict
items, or of none, never loads it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from crawlq.items.encode import Unserialisable, jsonable

if TYPE_CHECKING:
    from itemadapter import ItemAdapter

__all__ = ["adapt", "is_item", "item_key"]


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
    values become JSON by `crawlq.items.encode.jsonable` (datetime to ISO 8601 text, Decimal
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
