"""Typed items to plain dicts (`adapt`), and the key of item dedup (`item_key`).

itemadapter is imported on the first value that is not a dict (it imports pydantic, attrs
and their kin when they are installed: ~50 ms and ~8 MB per process), so a crawl of dict
items, or of none, never loads it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    """The item as a plain ``dict`` of its fields, as the stores keep it.

    A dict is returned as it is (not copied). A dataclass, attrs class or pydantic model
    becomes ``{field: value}`` with nested items made dicts too (itemadapter's
    ``ItemAdapter.asdict``; a pydantic model through ``model_dump``).

    Raises:
        TypeError: ``item`` is not an item (`is_item`).
    """
    if isinstance(item, dict):
        return item
    if not is_item(item):
        raise TypeError(f"{type(item).__name__} is not an item")
    dump = getattr(item, "model_dump", None)
    if callable(dump):  # pydantic v2: its own serialisation (aliases aside) of nested models
        out = dump(mode="json")
        if isinstance(out, dict):
            return out
    return dict(_adapter()(item).asdict())


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
