"""Built-in validation of an item against its declared type: `invalid`.

What is checked (a bad item is dropped with reason ``invalid: field NAME: WHY``, never
stored):

* a pydantic (v2) model instance: nothing more, pydantic validated it when the callback made
  it; a ``ValidationError`` the callback raised is a bad item too (`validation_error_reason`);
* a dataclass or attrs instance: each field's value against its annotation, for the simple
  types ``str``, ``int``, ``float`` (an ``int`` is one), ``bool``, ``None``, ``list[X]``,
  ``dict[K, V]``, ``Optional``/``Union``/``X | Y`` and ``Literal``; any other annotation
  accepts every value;
* a ``dict``, when the spider declares ``item_type``: against that type. A pydantic model
  validates it (``model_validate``: the item becomes the model, so its conversions apply);
  a dataclass, attrs class or ``TypedDict`` checks that its required fields are there, that
  it has no other keys, and each value as above.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

__all__ = ["invalid", "validation_error_reason"]

_SIMPLE: dict[type, str] = {str: "str", int: "int", float: "float", bool: "bool"}


def invalid(item: object, item_type: type | None = None) -> tuple[object, str | None]:
    """Check ``item``; return it (a dict validated by a pydantic ``item_type``: the model).

    Args:
        item: What the callback yielded (`crawlq.items.is_item`).
        item_type: The spider's declared item class, or None.

    Returns:
        ``(item, None)`` when it is good, else ``(item, "field NAME: WHY")``.
    """
    if isinstance(item, dict):
        if item_type is None or isinstance(item_type, dict):
            return item, None
        return _dict_against(item, item_type)
    if hasattr(type(item), "model_fields"):  # pydantic: validated when it was made
        return item, None
    hints = _hints(type(item))
    if not hints:
        return item, None
    names = _field_names(item)
    for name in names:
        if name in hints:
            why = check_value(getattr(item, name, None), hints[name])
            if why is not None:
                return item, f"field {name}: {why}"
    return item, None


def validation_error_reason(exc: BaseException) -> str | None:
    """``"field NAME: WHY"`` of a pydantic ``ValidationError``; None for another exception."""
    cls = type(exc)
    if cls.__name__ != "ValidationError" or not cls.__module__.startswith("pydantic"):
        return None
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except Exception:
        first = None
    if not isinstance(first, dict):
        return f"field ?: {str(exc).splitlines()[0]}"
    where = ".".join(str(p) for p in first.get("loc", ())) or "?"
    return f"field {where}: {first.get('msg', 'invalid')}"


def check_value(value: Any, annotation: Any) -> str | None:
    """Why ``value`` does not fit ``annotation`` (``"expected int, got str"``), or None."""
    if annotation is Any or isinstance(annotation, str | typing.TypeVar):
        return None
    if annotation is None or annotation is type(None):
        return None if value is None else f"expected None, got {type(value).__name__}"
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        arms = get_args(annotation)
        if any(check_value(value, arm) is None for arm in arms):
            return None
        return f"expected {_name(annotation)}, got {type(value).__name__}"
    if origin is Literal:
        allowed = get_args(annotation)
        return None if value in allowed else f"expected one of {list(allowed)!r}, got {value!r}"
    if origin in (list, dict) or annotation in (list, dict):
        return _container(value, origin or annotation, get_args(annotation))
    if annotation in _SIMPLE:
        if _simple_ok(value, annotation):
            return None
        return f"expected {_SIMPLE[annotation]}, got {type(value).__name__}"
    return None  # any other annotation: accepted


def _simple_ok(value: Any, annotation: type) -> bool:
    if annotation is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if annotation is float:
        return isinstance(value, int | float)
    return isinstance(value, annotation)


def _container(value: Any, kind: Any, args: tuple[Any, ...]) -> str | None:
    if not isinstance(value, kind):
        return f"expected {kind.__name__}, got {type(value).__name__}"
    if kind is list and args:
        for i, element in enumerate(value):
            why = check_value(element, args[0])
            if why is not None:
                return f"[{i}]: {why}"
    if kind is dict and len(args) == 2:
        for key, element in value.items():
            why = check_value(key, args[0]) or check_value(element, args[1])
            if why is not None:
                return f"[{key!r}]: {why}"
    return None


def _dict_against(item: dict[str, Any], item_type: type) -> tuple[object, str | None]:
    validate = getattr(item_type, "model_validate", None)
    if callable(validate):
        try:
            return validate(item), None
        except Exception as exc:
            why = validation_error_reason(exc)
            if why is None:
                raise
            return item, why
    hints = _hints(item_type)
    if not hints:
        return item, None
    for name in item:
        if name not in hints:
            return item, f"field {name}: not a field of {item_type.__name__}"
    for name in _required(item_type, hints):
        if name not in item:
            return item, f"field {name}: missing"
    for name, value in item.items():
        why = check_value(value, hints[name])
        if why is not None:
            return item, f"field {name}: {why}"
    return item, None


def _hints(cls: type) -> dict[str, Any]:
    """The class's resolved annotations ({} when they cannot be resolved)."""
    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {}


def _field_names(item: object) -> list[str]:
    if dataclasses.is_dataclass(item):
        return [f.name for f in dataclasses.fields(item)]
    attrs_fields = getattr(type(item), "__attrs_attrs__", None)
    if attrs_fields is not None:
        return [a.name for a in attrs_fields]
    return []


def _required(item_type: type, hints: dict[str, Any]) -> list[str]:
    """The fields a dict must have to be an ``item_type``."""
    keys = getattr(item_type, "__required_keys__", None)
    if keys is not None:  # a TypedDict
        return sorted(keys)
    if dataclasses.is_dataclass(item_type):
        missing = dataclasses.MISSING
        return [
            f.name
            for f in dataclasses.fields(item_type)
            if f.default is missing and f.default_factory is missing
        ]
    attrs_fields = getattr(item_type, "__attrs_attrs__", None)
    if attrs_fields is not None:
        return [a.name for a in attrs_fields if repr(a.default) == "NOTHING"]  # attrs.NOTHING
    return []


def _name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")
