"""Setting values read from text or TOML: byte sizes, booleans, lists, per-host tables.

Pure conversions, no knowledge of which settings exist: `coerce_value` takes the field's
type hint. Errors are ``TypeError``/``ValueError``; the sources
(`crawlq.settings.crawl_settings`) turn them into a `ConfigError` that names the setting and
where the value came from.
"""

from __future__ import annotations

import json
import math
import re
import types
from collections.abc import Callable, Mapping
from typing import Any, Union, get_args, get_origin

__all__ = [
    "AUTH_KEYS",
    "HostAuth",
    "coerce_value",
    "header_lines",
    "host_auth_tables",
    "parse_bytes",
    "split_hosts",
]

HostAuth = tuple[str, str | None, str | None, str | None]
"""One host's credentials by reference: ``(host, auth_user, auth_password_env,
auth_token_env)``; the two ``_env`` values are names of environment variables, never secrets."""

AUTH_KEYS = ("auth_user", "auth_password_env", "auth_token_env")
"""The keys of a ``[hosts."x"]`` table that name credentials (README "Authentication")."""

_POLITENESS_KEYS = ("delay_s", "concurrency")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def parse_bytes(value: str | int) -> int:
    """Parse a byte size: an int, or a string such as ``"10MiB"``, ``"500 kB"``, ``"2048"``.

    Raises:
        ValueError: not a size.
    """
    if isinstance(value, int):
        return value
    match = _SIZE_RE.match(value)
    if not match:
        raise ValueError(f"not a byte size: {value!r} (try 10MiB or 1048576)")
    number, unit = match.groups()
    return int(float(number) * _SIZE_UNITS[(unit or "b").lower()])


def split_hosts(
    value: Any,
) -> tuple[tuple[tuple[str, float | None, int | None], ...], tuple[HostAuth, ...]]:
    """A ``hosts`` table's politeness overrides and its credentials (by reference), apart.

    A table with only credential keys (`AUTH_KEYS`) gives no politeness override, so a
    worker's credentials never make its ``hosts`` differ from its job's.

    Raises:
        TypeError: Not a table of host -> table, an unknown key, a value out of range, or
            credential keys that do not go together (`_auth_entry`).
    """
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise TypeError(
                f"expected a JSON object of host -> {{delay_s, concurrency}}: {exc}"
            ) from exc
    if isinstance(value, list | tuple):  # the stored form: [[host, delay_s, concurrency], ...]
        try:
            value = {h: {"delay_s": d, "concurrency": c} for h, d, c in value}
        except (TypeError, ValueError) as exc:
            raise TypeError(f"expected [host, delay_s, concurrency] triples: {exc}") from exc
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a table of host -> {{delay_s, concurrency}}, got {value!r:.80}")
    politeness = []
    auth = []
    for host, table in value.items():
        entry = _host_entry(host, table)
        if not any(key in table for key in AUTH_KEYS):
            politeness.append(entry)
            continue
        auth.append(_auth_entry(entry[0], table))
        if any(key in table for key in _POLITENESS_KEYS):
            politeness.append(entry)
    return tuple(sorted(politeness)), tuple(sorted(auth, key=lambda a: a[0]))


def host_auth_tables(entries: tuple[HostAuth, ...]) -> str:
    """``entries`` as the JSON text of ``CRAWLQ_HOSTS``: names of variables, no secret.

    For the worker processes a command starts: they read the same variables.
    """
    tables = {
        host: {
            key: value
            for key, value in zip(AUTH_KEYS, (user, password_env, token_env), strict=True)
            if value is not None
        }
        for host, user, password_env, token_env in entries
    }
    return json.dumps(tables, sort_keys=True)


def _auth_entry(host: str, table: Mapping[str, Any]) -> HostAuth:
    """One host's credential keys: basic (user and password variable) or bearer (token).

    ``auth_user`` goes with ``auth_password_env``; ``auth_token_env`` goes alone.

    Raises:
        TypeError: Any other combination, a value that is not a string, a user name with a
            colon (RFC 7617 §2), or an ``_env`` value that is not an environment variable's
            name (or is a ``CRAWLQ_*`` one: those are settings).
    """
    user, password_env, token_env = (table.get(key) for key in AUTH_KEYS)
    for key in AUTH_KEYS:
        if key in table and (not isinstance(table[key], str) or not table[key]):
            raise TypeError(f"hosts.{host}.{key} must be a non-empty string")
    if token_env is not None and (user is not None or password_env is not None):
        raise TypeError(
            f"hosts.{host}: auth_token_env (bearer) goes alone, without auth_user and "
            "auth_password_env (basic)"
        )
    if token_env is None and (user is None or password_env is None):
        missing = "auth_password_env" if password_env is None else "auth_user"
        raise TypeError(
            f"hosts.{host}: basic auth needs auth_user and auth_password_env; {missing} is missing"
        )
    if user is not None and ":" in user:
        raise TypeError(f"hosts.{host}.auth_user may not hold a colon (RFC 7617)")
    for key, name in (("auth_password_env", password_env), ("auth_token_env", token_env)):
        if name is None:
            continue
        if not _ENV_NAME.fullmatch(name) or name.upper().startswith("CRAWLQ_"):
            raise TypeError(
                f"hosts.{host}.{key} must name an environment variable (letters, digits, _; "
                f"not CRAWLQ_*, which are settings), got {name!r:.60}"
            )
    return (host, user, password_env, token_env)


def header_lines(value: Any) -> tuple[str, ...]:
    """``default_headers`` lines from text, a list of ``Name: value`` or a name -> value table.

    Text holds one header per line (header values hold commas, so not a comma list).

    Raises:
        TypeError: None of these.
    """
    if isinstance(value, str):
        return tuple(line for line in value.splitlines() if line.strip())
    if isinstance(value, Mapping):
        return tuple(f"{k}: {v}" for k, v in value.items())
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(f"expected 'Name: value' lines, got {value!r:.80}")


def coerce_value(hint: Any, value: Any, name: str = "") -> Any:
    """``value`` (from TOML, the environment, the command line or JSON) as type ``hint``.

    Strings are parsed: ``true``/``false``/``1``/``0``/``yes``/``no``/``on``/``off`` for
    booleans, comma-separated lists for tuples, ``none`` or empty for an optional value, and
    byte sizes (``10MiB``) for an integer setting named ``*_bytes``.

    Raises:
        TypeError: ``value`` is not of, and cannot be read as, type ``hint``.
        ValueError: A number or byte size that does not parse.
    """
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("", "none")):
            return None
        return coerce_value(args[0], value, name)
    if origin is tuple:
        return _to_tuple(value)
    convert = _SCALARS.get(hint)
    if convert is None:
        raise TypeError(f"unsupported setting type {hint!r}")  # pragma: no cover
    return convert(value, name)


def _to_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v for v in (p.strip() for p in value.split(",")) if v)
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    raise TypeError(f"expected a list, got {value!r}")


def _to_bool(value: Any, _name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
        return False
    raise TypeError(f"expected true or false, got {value!r}")


def _to_int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"expected an integer, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        if name.endswith("_bytes"):
            return parse_bytes(text)
        raise TypeError(f"expected an integer, got {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"expected an integer, got {value!r}")
    return int(value)


def _to_float(value: Any, _name: str) -> float:
    if isinstance(value, bool):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _to_str(value: Any, _name: str) -> str:
    return str(value)


_SCALARS: dict[Any, Callable[[Any, str], Any]] = {
    bool: _to_bool,
    int: _to_int,
    float: _to_float,
    str: _to_str,
}


def _host_entry(host: Any, table: Any) -> tuple[str, float | None, int | None]:
    """One ``hosts`` entry: ``(host, delay_s, concurrency)``.

    Raises:
        TypeError: Not a table of delay_s and/or concurrency, or a value out of range.
    """
    if not isinstance(host, str) or not host.strip() or not isinstance(table, Mapping):
        raise TypeError(f"hosts.{host}: expected a table with delay_s and/or concurrency")
    unknown = set(table) - {*_POLITENESS_KEYS, *AUTH_KEYS}
    if unknown:
        raise TypeError(f"hosts.{host}: unknown key {sorted(unknown)[0]!r}")
    delay = table.get("delay_s")
    conc = table.get("concurrency")
    if delay is not None:
        delay = coerce_value(float, delay)
        if not math.isfinite(delay) or delay < 0:
            raise TypeError(f"hosts.{host}.delay_s must be a number >= 0, got {delay}")
    if conc is not None:
        conc = coerce_value(int, conc)
        if conc < 1:
            raise TypeError(f"hosts.{host}.concurrency must be at least 1, got {conc}")
    return (host.strip().lower(), delay, conc)
