"""The declared item type of a crawl, and the typed items table it gives (``--items-table``).

The type is code, so it comes from this process's own configuration: the ``item_type``
setting (``--item-type module:Class`` or ``file.py:Class``, a settings file, ``CRAWLQ_*``) or,
without it, the spider class's ``item_type`` attribute. Neither is ever read from a shared
job's settings in Redis (both settings are per-process, not `crawlq.engine.job.JOB_FIELDS`).
"""

from __future__ import annotations

from crawlq.errors import ConfigError
from crawlq.items.schema import ItemTable, item_fields
from crawlq.settings import Settings
from crawlq.spider.loading import load_object, load_spider
from crawlq.spider.spider import Spider

__all__ = ["declared_item_type", "items_table_of", "load_item_type"]


def load_item_type(path: str) -> type:
    """The item class ``path`` names (``module:Class`` or ``path/to/file.py:Class``).

    A file is loaded as `crawlq.spider.loading.load_spider` loads a spider file: once, the
    same module when the spider lives there too.

    Raises:
        ConfigError: Named ``item_type``: no colon, a module or file that cannot be loaded, a
            missing attribute, or a class that is not a dataclass, attrs class, pydantic
            model or TypedDict (`crawlq.items.schema.item_fields`).
    """
    found = load_object(path, "item_type")
    if not isinstance(found, type):
        raise ConfigError("item_type", f"{path!r} is not a class")
    item_fields(found)  # a clear error now rather than at the first item
    return found


def declared_item_type(settings: Settings, spider: type[Spider] | None) -> type | None:
    """The item class in force: the ``item_type`` setting, else ``spider.item_type``, else None.

    Raises:
        ConfigError: Named ``item_type``: the setting cannot be loaded (`load_item_type`), or
            the spider's attribute is not an item class.
    """
    if settings.item_type is not None:
        return load_item_type(settings.item_type)
    declared = getattr(spider, "item_type", None) if spider is not None else None
    if declared is None:
        return None
    if not isinstance(declared, type):
        raise ConfigError("item_type", f"{spider!r}.item_type is {declared!r}, not a class")
    item_fields(declared)
    return declared


def items_table_of(settings: Settings, spider: type[Spider] | None = None) -> ItemTable | None:
    """The typed items table ``settings.items_table`` asks for, or None when it is not set.

    ``spider`` defaults to the class ``settings.spider`` names (loaded from this process's
    own configuration).

    Raises:
        ConfigError: Named ``items_table``: the store is not PostgreSQL, no item type is
            declared, or the name cannot be a table; named ``item_type``: the type cannot
            be loaded or a field's name cannot be a column.
    """
    name = settings.items_table
    if name is None:
        return None
    if not settings.store.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            "items_table",
            f"--items-table {name} needs a PostgreSQL store (--store postgresql://…)",
        )
    if spider is None:
        spider = load_spider(settings.spider)
    item_type = declared_item_type(settings, spider)
    if item_type is None:
        raise ConfigError(
            "items_table",
            f"--items-table {name} needs a declared item type: --item-type module:Class, "
            "or an item_type attribute on the spider",
        )
    return ItemTable.of(name, item_type)
