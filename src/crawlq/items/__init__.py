"""Items a spider yields: typed items made plain, validation, and the pipeline contract.

A callback may yield a ``dict``, a dataclass, an attrs class, a pydantic (v2) model or a
``TypedDict`` (a dict at run time); `adapt` makes any of them the plain ``dict`` the stores
keep (through itemadapter), its values made JSON by `jsonable` (`crawlq.items.adapt`: ISO
8601 text, Decimal text, base64 bytes). `invalid` checks an item against its declared type
(`crawlq.items.validate`); `crawlq.items.schema` reads the fields of a declared item class
(the typed sinks). A pipeline is any class with the methods of `Pipeline`
(`crawlq.items.pipelines`); it drops an item by returning None or raising `DropItem`. The
engine runs them (`crawlq.engine.item_flow`); the key of item dedup is `item_key`.
"""

from crawlq.items.adapt import Unserialisable, adapt, is_item, item_key, jsonable
from crawlq.items.pipelines import DropItem, Pipeline
from crawlq.items.validate import invalid

__all__ = [
    "DropItem",
    "Pipeline",
    "Unserialisable",
    "adapt",
    "invalid",
    "is_item",
    "item_key",
    "jsonable",
]
