"""Where setting values come from, merged in precedence order, and names we do not know.

Sources, lowest first: a TOML file, the spider's ``custom_settings``, ``CRAWLQ_*``
environment variables, the command line (`merge`); stored job settings are read with
`coerce_settings`. Every value is converted to its field's type (`crawlq.settings.values`).
An unknown name is a `ConfigError` that suggests the closest names (`suggest`: did you mean
``delay_s``?), never silently dropped.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, get_type_hints

from crawlq.errors import ConfigError
from crawlq.settings.model import Settings
from crawlq.settings.values import coerce_hosts, coerce_value, header_lines

__all__ = ["coerce_settings", "merge", "suggest"]

_ENV_PREFIX = "CRAWLQ_"
_HINTS: dict[str, Any] = {}
_UNIT_SUFFIXES = ("_s", "_bytes")


def suggest(name: str, *, limit: int = 3) -> list[str]:
    """The setting names closest to an unknown ``name``, best first (possibly none).

    A name missing only its unit (``delay`` for ``delay_s``, ``max_body`` for
    ``max_body_bytes``) is the one answer; else close spellings (`difflib`).
    """
    names = Settings.field_names()
    key = name.strip().lower().replace("-", "_")
    with_unit = [key + suffix for suffix in _UNIT_SUFFIXES if key + suffix in names]
    if with_unit:
        return with_unit
    close = difflib.get_close_matches(key, names, n=limit, cutoff=0.6)
    return [n for n in close if n != key]


def _env_name(name: str) -> str:
    return f"{_ENV_PREFIX}{name.upper()}"


def merge(
    *,
    file: str | Path | None,
    spider_settings: Mapping[str, Any] | None,
    env: Mapping[str, str] | None,
    cli: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The values of every source, typed and merged in precedence order (`Settings.build`).

    Raises:
        ConfigError: An unknown key, a value of the wrong type, or an unreadable file.
    """
    merged: dict[str, Any] = {}
    if file is not None:
        try:
            with open(file, "rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(str(file), f"cannot read settings file: {exc}") from exc
        merged.update(_coerce_all(data, f"settings file {file}"))
    if spider_settings:
        merged.update(_coerce_all(spider_settings, "spider custom_settings"))
    environ = os.environ if env is None else env
    env_values = {
        key[len(_ENV_PREFIX) :].lower(): value
        for key, value in environ.items()
        if key.startswith(_ENV_PREFIX) and not key.startswith(_ENV_PREFIX + "TEST_")
    }
    merged.update(_coerce_all(env_values, "environment CRAWLQ_*", _env_name))
    if cli:
        merged.update(_coerce_all({k: v for k, v in cli.items() if v is not None}, "command line"))
    return merged


def coerce_settings(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Setting values from ``source`` converted to their types (as `Settings.build` does).

    For values read from shared state (a job's stored settings), which may hold anything.

    Raises:
        ConfigError: An unknown name or a value of the wrong type; the message names the
            setting and ``source``.
    """
    return _coerce_all(values, source)


def _coerce_all(
    values: Mapping[str, Any], source: str, spell: Callable[[str], str] = str
) -> dict[str, Any]:
    """Coerce ``values`` from ``source`` to the settings' types.

    ``spell`` writes a setting name as that source does (``CRAWLQ_DELAY_S`` in the
    environment), for the suggestions of an unknown one.
    """
    if not _HINTS:
        _HINTS.update(get_type_hints(Settings))
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name not in _HINTS or name == "explicit":
            close = suggest(name)
            hint = f"; did you mean {' or '.join(spell(n) for n in close)}?" if close else ""
            raise ConfigError(
                name,
                f"unknown setting (from {source}){hint} (`crawlq settings` lists them all)",
            )
        if name == "job" and isinstance(value, str):
            out[name] = value  # verbatim: "" or "none" is a bad name, not "no job"
            continue
        try:
            if name == "hosts":
                out[name] = coerce_hosts(value)
                continue
            if name == "default_headers":
                out[name] = header_lines(value)
                continue
            out[name] = coerce_value(_HINTS[name], value, name)
        except (TypeError, ValueError) as exc:
            raise ConfigError(name, f"{exc} (from {source})") from exc
    return out
