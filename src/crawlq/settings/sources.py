"""Where setting values come from, read and typed for a schema, in precedence order.

`read_sources` merges, lowest first (later ones override earlier):

1. a TOML file (``--config FILE``; keys are the field names);
2. the spider's ``custom_settings`` dict;
3. environment variables ``CRAWLQ_<FIELD NAME IN UPPER CASE>`` (``CRAWLQ_DELAY_S=0.5``);
4. command-line options.

(The fields' defaults are the lowest of all: `crawlq.settings.crawl_settings.Settings`.)

This module knows how sources are spelled, not which settings exist: each function takes the
schema, ``hints``, a mapping of every setting name (in declaration order) to its type hint.
Every value is converted to its type (`crawlq.settings.coercion`); an unknown name is a
`ConfigError` that suggests the closest names (`closest`: did you mean ``delay_s``?), never
silently dropped. Credentials (the ``auth_*`` keys of ``hosts`` tables) are read only from
the process's own settings file or environment, never from a spider or shared state.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from crawlq.errors import ConfigError
from crawlq.settings.coercion import HostAuth, coerce_value, header_lines, split_hosts

__all__ = ["ENV_PREFIX", "SCRAPY_NAMES", "closest", "coerce_all", "read_sources"]

ENV_PREFIX = "CRAWLQ_"
"""The environment's settings namespace: ``CRAWLQ_<NAME>``; ``CRAWLQ_TEST_*`` is the tests'."""

_UNIT_SUFFIXES = ("_s", "_bytes")

SCRAPY_NAMES = {
    "DOWNLOAD_DELAY": "delay_s",
    "CONCURRENT_REQUESTS": "concurrency",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "host_concurrency",
    "CONCURRENT_REQUESTS_PER_IP": "host_concurrency",
    "USER_AGENT": "user_agent",
    "ROBOTSTXT_OBEY": "obey_robots",
    "DEPTH_LIMIT": "max_depth",
    "CLOSESPIDER_PAGECOUNT": "max_pages",
    "ITEM_PIPELINES": "item_pipelines",
    "DOWNLOADER_MIDDLEWARES": "downloader_middlewares",
    "SPIDER_MIDDLEWARES": "spider_middlewares",
    "DOWNLOAD_TIMEOUT": "timeout_s",
    "RETRY_TIMES": "max_retries",
    "DOWNLOAD_MAXSIZE": "max_body_bytes",
    "REDIRECT_MAX_TIMES": "max_redirects",
    "DEFAULT_REQUEST_HEADERS": "default_headers",
    "COOKIES_ENABLED": "cookies_enabled",
    "AUTOTHROTTLE_ENABLED": "autothrottle",
    "AUTOTHROTTLE_MAX_DELAY": "max_delay_s",
}
"""Scrapy's setting names (``custom_settings`` of a ported spider) -> crawlq's nearest setting,
the one suggestion for them. Suggested, never accepted: values and units may differ (a Scrapy
``ITEM_PIPELINES`` dict is a crawlq list; ``DOWNLOAD_MAXSIZE`` is bytes in both)."""


def closest(name: str, names: Sequence[str], *, limit: int = 3) -> list[str]:
    """The names of ``names`` closest to an unknown ``name``, best first (possibly none).

    A Scrapy setting's name (`SCRAPY_NAMES`: ``DOWNLOAD_DELAY`` for ``delay_s``) or a name
    missing only its unit (``delay`` for ``delay_s``, ``max_body`` for ``max_body_bytes``) is
    the one answer; else close spellings (`difflib`).
    """
    scrapy = SCRAPY_NAMES.get(name.strip().upper().replace("-", "_"))
    if scrapy is not None:
        return [scrapy]
    key = name.strip().lower().replace("-", "_")
    with_unit = [key + suffix for suffix in _UNIT_SUFFIXES if key + suffix in names]
    if with_unit:
        return with_unit
    close = difflib.get_close_matches(key, names, n=limit, cutoff=0.6)
    return [n for n in close if n != key]


def _env_name(name: str) -> str:
    return f"{ENV_PREFIX}{name.upper()}"


def read_sources(
    hints: Mapping[str, Any],
    *,
    file: str | Path | None,
    spider_settings: Mapping[str, Any] | None,
    env: Mapping[str, str] | None,
    cli: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The values of every source, typed and merged in precedence order (module docstring).

    Args:
        hints: The schema: setting name -> type hint, in declaration order.
        file: A TOML file of ``name = value`` pairs, or None.
        spider_settings: The spider's ``custom_settings``.
        env: Environment mapping (``os.environ`` when None); only ``CRAWLQ_*`` keys count.
        cli: Values given on the command line; ``None`` values mean "not given".

    Returns:
        Only the names some source gave, with their typed values (``host_auth`` too, when a
        ``hosts`` table named credentials).

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
        merged.update(coerce_all(data, f"settings file {file}", hints, credentials=True))
    if spider_settings:
        merged.update(coerce_all(spider_settings, "spider custom_settings", hints))
    environ = os.environ if env is None else env
    env_values = {
        key[len(ENV_PREFIX) :].lower(): value
        for key, value in environ.items()
        if key.startswith(ENV_PREFIX) and not key.startswith(ENV_PREFIX + "TEST_")
    }
    merged.update(
        coerce_all(env_values, "environment CRAWLQ_*", hints, _env_name, credentials=True)
    )
    if cli:
        given = {k: v for k, v in cli.items() if v is not None}
        merged.update(coerce_all(given, "command line", hints))
    _check_credentials_set(merged.get("host_auth", ()), environ)
    return merged


def _check_credentials_set(entries: tuple[HostAuth, ...], environ: Mapping[str, str]) -> None:
    """Raise unless every environment variable that ``entries`` name is set (at start).

    Raises:
        ConfigError: Named ``hosts``; the message names the host and the variable, never a
            value.
    """
    for host, _user, password_env, token_env in entries:
        for key, variable in (("auth_password_env", password_env), ("auth_token_env", token_env)):
            if variable is not None and not environ.get(variable):
                raise ConfigError(
                    "hosts",
                    f"hosts.{host}.{key} names environment variable {variable}, which is not "
                    f"set (or empty): set it to the {key.split('_')[1]} for {host}",
                )


def coerce_all(
    values: Mapping[str, Any],
    source: str,
    hints: Mapping[str, Any],
    spell: Callable[[str], str] = str,
    *,
    credentials: bool = False,
) -> dict[str, Any]:
    """Coerce ``values`` from ``source`` to the types of ``hints`` (the schema).

    ``spell`` writes a setting name as that source does (``CRAWLQ_DELAY_S`` in the
    environment), for the suggestions of an unknown one. ``credentials``: the ``auth_*``
    keys of ``hosts`` tables are read (into ``host_auth``); from any other source (a
    spider, the command line, a job's settings in shared state) they are an error.

    Raises:
        ConfigError: An unknown name or a value of the wrong type; the message names the
            setting and ``source``.
    """
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name not in hints:
            close = closest(name, tuple(hints))
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
                out.update(_hosts(value, source, credentials=credentials))
                continue
            if name == "default_headers":
                out[name] = header_lines(value)
                continue
            out[name] = coerce_value(hints[name], value, name)
        except (TypeError, ValueError) as exc:
            raise ConfigError(name, f"{exc} (from {source})") from exc
    return out


def _hosts(value: Any, source: str, *, credentials: bool) -> dict[str, Any]:
    """``hosts`` and ``host_auth`` from a ``hosts`` table (`coerce_all`).

    A table of credentials only gives no ``hosts`` value, so it is not an explicit ``hosts``.

    Raises:
        TypeError: As `split_hosts`, or credentials from a source they may not come from.
    """
    politeness, auth = split_hosts(value)
    if auth and not credentials:
        raise TypeError(
            f"hosts.{auth[0][0]}: credentials (auth_*) are read only from this process's "
            f"settings file or CRAWLQ_HOSTS, never from {source}"
        )
    out: dict[str, Any] = {"host_auth": auth} if auth else {}
    if politeness or not auth:
        out["hosts"] = politeness
    return out
