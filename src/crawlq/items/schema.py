"""The fields of a declared item class, and the typed columns the sinks make of them.

`item_fields` reads a dataclass, an attrs class, a pydantic (v2) model or a ``TypedDict``
into `ItemField` s (name, annotation, nullable), in declaration order. `column_kind` reduces
an annotation to one of a few kinds, which both typed sinks map to their own types:

========================  ==========  ====================  ======================
annotation                kind        PostgreSQL            Arrow (Parquet)
========================  ==========  ====================  ======================
``str``                   text        ``text``              ``string``
``int``                   int         ``bigint``            ``int64``
``float``                 float       ``double precision``  ``float64``
``bool``                  bool        ``boolean``           ``bool``
``datetime``              timestamp   ``timestamptz``       ``timestamp[us, UTC]``
``date``                  date        ``date``              ``date32``
``Decimal``               decimal     ``numeric``           ``string`` (exact text)
``bytes``                 bytes       ``bytea``             ``binary``
anything else             json        ``jsonb``             ``string`` (JSON text)
========================  ==========  ====================  ======================

``Optional[X]`` / ``X | None`` is X, nullable; another union is json. ``Annotated[X, ...]`` is
X. `cell` converts one stored item value (the JSON form the stores keep,
`crawlq.items.adapt`: a datetime arrives as its ISO 8601 text, a Decimal as text or a
number, bytes as base64 text) to the Python value of its kind, or raises `WrongType`;
`field_cells` does it for all of an item's fields (both typed sinks use it). `ItemTable` is
what a store is opened with for ``--items-table``.
Pure: no I/O, no database client.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crawlq.errors import ConfigError

__all__ = [
    "ARROW_TYPES",
    "KEY_COLUMNS",
    "MAX_IDENTIFIER_BYTES",
    "PARQUET_KEY_COLUMNS",
    "POSTGRES_TYPES",
    "ItemField",
    "ItemTable",
    "WrongType",
    "cell",
    "check_identifier",
    "column_kind",
    "field_cells",
    "item_fields",
    "json_text",
]

MAX_IDENTIFIER_BYTES = 63
"""PostgreSQL's longest identifier (NAMEDATALEN - 1), in UTF-8 bytes; longer ones are cut."""

KEY_COLUMNS = ("crawlq_fingerprint", "crawlq_index", "crawlq_job", "crawlq_url", "crawlq_stored_at")
"""The columns of a typed items table before its fields (prefixed, so that an item's own
``url`` or ``index`` field keeps its name); a field may not take these names."""

PARQUET_KEY_COLUMNS = (
    "crawlq_url",
    "crawlq_spider",
    "crawlq_created_at",
    "crawlq_fingerprint",
    "crawlq_index",
)
"""The columns of a typed Parquet items export before its fields."""

POSTGRES_TYPES: Mapping[str, str] = {
    "text": "text",
    "int": "bigint",
    "float": "double precision",
    "bool": "boolean",
    "timestamp": "timestamp with time zone",
    "date": "date",
    "decimal": "numeric",
    "bytes": "bytea",
    "json": "jsonb",
}
"""Kind -> PostgreSQL type, spelled as ``information_schema.columns.data_type`` spells it."""

ARROW_TYPES: Mapping[str, str] = {
    "text": "string",
    "int": "int64",
    "float": "float64",
    "bool": "bool",
    "timestamp": "timestamp[us, tz=UTC]",
    "date": "date32",
    "decimal": "string",
    "bytes": "binary",
    "json": "string",
}
"""Kind -> Arrow type name (``str(pyarrow_type)``) of a typed Parquet column."""

_SIMPLE: dict[object, str] = {
    str: "text",
    int: "int",
    float: "float",
    bool: "bool",
    dt.datetime: "timestamp",
    dt.date: "date",
    decimal.Decimal: "decimal",
    bytes: "bytes",
}
_INT64 = range(-(2**63), 2**63)


@dataclass(frozen=True, slots=True)
class ItemField:
    """One declared field of an item class.

    Attributes:
        name: The field's name (the key in the item's dict, the column's name).
        type: Its annotation with ``Optional`` removed (``int`` for ``int | None``).
        nullable: The annotation admits None.
    """

    name: str
    type: object
    nullable: bool

    @property
    def kind(self) -> str:
        """The column kind of ``type`` (`column_kind`)."""
        return column_kind(self.type)


class WrongType(ValueError):
    """An item value does not fit its field's kind; raised by `cell`, the message names why."""


def item_fields(cls: type) -> tuple[ItemField, ...]:
    """The fields of an item class, in declaration order.

    Args:
        cls: A dataclass, an attrs class, a pydantic (v2) model class or a ``TypedDict``.

    Returns:
        One `ItemField` per field (a pydantic field by its name, not its alias).

    Raises:
        ConfigError: Named ``item_type``: ``cls`` is none of the four kinds, has no fields,
            or an annotation cannot be resolved (a forward reference to an unknown name).
    """
    if not isinstance(cls, type):
        raise ConfigError("item_type", f"{cls!r} is not a class")
    named = _annotations(cls)
    if not named:
        raise ConfigError("item_type", f"{cls.__qualname__} has no fields")
    return tuple(_field(name, annotation) for name, annotation in named)


def _annotations(cls: type) -> list[tuple[str, object]]:
    fields_of_model = getattr(cls, "model_fields", None)
    if isinstance(fields_of_model, dict) and hasattr(cls, "model_validate"):  # pydantic v2
        return [(name, info.annotation) for name, info in fields_of_model.items()]
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise ConfigError(
            "item_type", f"{cls.__qualname__}: its annotations cannot be resolved: {exc}"
        ) from exc
    if dataclasses.is_dataclass(cls):
        return [(f.name, hints.get(f.name, Any)) for f in dataclasses.fields(cls)]
    attrs_fields = getattr(cls, "__attrs_attrs__", None)
    if attrs_fields is not None:
        return [(a.name, hints.get(a.name, a.type or Any)) for a in attrs_fields]
    if typing.is_typeddict(cls):
        return list(hints.items())
    raise ConfigError(
        "item_type",
        f"{cls.__qualname__} is not a dataclass, attrs class, pydantic model or TypedDict",
    )


def _field(name: str, annotation: object) -> ItemField:
    annotation = _unwrap(annotation)
    args = typing.get_args(annotation)
    if _is_union(annotation) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        inner = _unwrap(rest[0]) if len(rest) == 1 else annotation
        return ItemField(name, inner, True)
    return ItemField(name, annotation, annotation is Any or annotation is None)


def _unwrap(annotation: object) -> object:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Required, typing.NotRequired):
        return _unwrap(typing.get_args(annotation)[0])
    return annotation


def _is_union(annotation: object) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def column_kind(annotation: object) -> str:
    """The kind (a key of `POSTGRES_TYPES`) of a field's annotation; see the module table."""
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and annotation in _SIMPLE:
        return _SIMPLE[annotation]
    if typing.get_origin(annotation) is typing.Literal:
        kinds = {_SIMPLE.get(type(v)) for v in typing.get_args(annotation)}
        if len(kinds) == 1 and None not in kinds:
            return kinds.pop() or "json"
    return "json"


def check_identifier(name: str, what: str, option: str) -> str:
    """Return ``name`` if PostgreSQL can keep it as a quoted identifier, unchanged.

    Args:
        name: The table or column name.
        what: What it names, for the message (``"field 'price' of Product"``).
        option: The setting named by the error (``items_table``, ``item_type``).

    Raises:
        ConfigError: Named ``option``: the name is empty, holds a NUL character, or is longer
            than `MAX_IDENTIFIER_BYTES` bytes in UTF-8 (PostgreSQL would cut it).
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(option, f"{what}: an empty name cannot be a PostgreSQL identifier")
    if "\x00" in name:
        raise ConfigError(option, f"{what}: a name with a NUL character cannot be a column")
    size = len(name.encode("utf-8"))
    if size > MAX_IDENTIFIER_BYTES:
        raise ConfigError(
            option,
            f"{what}: {name[:20]!r}... is {size} bytes; PostgreSQL identifiers hold at most "
            f"{MAX_IDENTIFIER_BYTES}",
        )
    return name


def cell(kind: str, value: object) -> object:
    """One stored item value as the Python value of its column kind (None stays None).

    Accepted: text a ``str``; int an ``int`` (not a bool) in the 64-bit range; float an
    ``int`` or ``float`` (not a bool); bool a ``bool``; timestamp a ``datetime`` or ISO 8601
    text (without an offset: UTC); date a ``date`` or ISO text; decimal a number or numeric
    text; bytes ``bytes`` or base64 text (RFC 4648, as `crawlq.items.adapt` stores bytes);
    json any value (returned as it is).

    Raises:
        WrongType: The value does not fit; the message names the kind and the value's type
            (never the value: an item may hold what a log should not).
    """
    if value is None or kind == "json":
        return value
    try:
        out = _CONVERT[kind](value)
    except (ValueError, TypeError, ArithmeticError):
        out = _NO
    if out is _NO:
        raise WrongType(f"expected {kind}, got {type(value).__name__}")
    return out


_NO = object()


def _text(v: object) -> object:
    return v if isinstance(v, str) else _NO


def _int(v: object) -> object:
    return v if type(v) is int and v in _INT64 else _NO


def _float(v: object) -> object:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else _NO


def _bool(v: object) -> object:
    return v if isinstance(v, bool) else _NO


def _timestamp(v: object) -> object:
    if isinstance(v, str):
        v = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    if not isinstance(v, dt.datetime):
        return _NO
    return v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)


def _date(v: object) -> object:
    if isinstance(v, str):
        return dt.date.fromisoformat(v)
    return v if isinstance(v, dt.date) and not isinstance(v, dt.datetime) else _NO


def _decimal(v: object) -> object:
    if isinstance(v, bool) or not isinstance(v, int | float | str | decimal.Decimal):
        return _NO
    out = decimal.Decimal(str(v))
    return out if out.is_finite() else _NO


def _bytes(v: object) -> object:
    if isinstance(v, str):  # the stored form (crawlq.items.adapt): base64, RFC 4648
        return base64.b64decode(v, validate=True)
    return v if isinstance(v, bytes) else _NO


_CONVERT = {
    "text": _text,
    "int": _int,
    "float": _float,
    "bool": _bool,
    "timestamp": _timestamp,
    "date": _date,
    "decimal": _decimal,
    "bytes": _bytes,
}


@dataclass(frozen=True, slots=True)
class ItemTable:
    """A typed items table: its name and the declared item class's fields.

    Build with `ItemTable.of`; a store opened with one writes one row per item of every page
    into it, beside the JSONB ``items`` table (``--items-table``).

    Attributes:
        name: The table's name in the store's schema.
        item_type: Qualified name of the declared class (for messages).
        fields: Its fields, in order; each becomes a column of its kind.
    """

    name: str
    item_type: str
    fields: tuple[ItemField, ...]

    @classmethod
    def of(cls, name: str, item_type: type) -> ItemTable:
        """Check ``name`` and the class's field names; see `item_fields`.

        Raises:
            ConfigError: ``items_table`` for a bad table name; ``item_type`` for a class
                that is no item class, or a field whose name cannot be a column (empty, too
                long, or one of `KEY_COLUMNS`), naming the field.
        """
        check_identifier(name, f"table name {name!r}", "items_table")
        fields = item_fields(item_type)
        qual = item_type.__qualname__
        for f in fields:
            check_identifier(f.name, f"field {f.name!r} of {qual}", "item_type")
            if f.name in KEY_COLUMNS:
                raise ConfigError(
                    "item_type",
                    f"field {f.name!r} of {qual}: the typed items table has its own "
                    f"{f.name!r} column ({', '.join(KEY_COLUMNS)} are taken)",
                )
        return cls(name, qual, fields)

    def row(self, data: Mapping[str, object]) -> list[object]:
        """The field cells of one item's data, in field order (`field_cells`)."""
        return field_cells(self.fields, data)


def field_cells(fields: Sequence[ItemField], data: Mapping[str, object]) -> list[object]:
    """The cells of one item's stored data for ``fields``, in field order.

    A missing key of a nullable field is None; extra keys are ignored (the JSON of the item
    keeps them).

    Raises:
        WrongType: A value does not fit its field (`cell`), a field that is not nullable is
            missing or None, or the data holds none of the fields at all (an item of
            another type); the message names the field, never the value.
    """
    out: list[object] = []
    for f in fields:
        value = data.get(f.name)
        if value is None and not f.nullable:
            raise WrongType(f"field {f.name!r}: missing or null, and not Optional")
        try:
            out.append(cell(f.kind, value))
        except WrongType as exc:
            raise WrongType(f"field {f.name!r}: {exc}") from None
    if fields and not any(f.name in data for f in fields):
        raise WrongType("none of the declared fields is in the item")
    return out


def json_text(value: object) -> str:
    """A json-kind value as compact JSON text (the Parquet cell of a json or decimal column)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
