"""What every setting's value must be: ranges, formats, cross-field rules, job names, stores.

`check` runs on the field values of a `crawlq.settings.Settings` being constructed (a mapping
of field name to value, so this module needs no `Settings` type and the type's module imports
it, one way). It raises `ConfigError` naming the setting (and the value) at the first failure,
and returns the few fields that have one spelling, written that way (``warc_dir`` made
absolute, ``strip_url_params``, ``inbox_methods``, ``skip_extensions`` and
``default_headers`` cleaned). Seconds above `MAX_S` are refused as typos.

Two checks are also used on their own, on a value given outside a `Settings`:

* `check_job_name`: a job name is spelled into Redis keys, log lines and command lines
  (`JOB_NAME_RULE`); the error names the setting ``job``.
* `check_store`: a ``store`` value names a store, a file path, ``sqlite:///PATH`` or
  ``postgresql://…``; anything else (another scheme, a libpq ``key=value`` string) is
  refused with a `ConfigError` naming ``store`` that never repeats a password.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from crawlq.errors import ConfigError
from crawlq.rules.proxies import parse_proxy
from crawlq.secrecy import redact
from crawlq.settings.archive import is_s3_url, names_a_scheme, parse_s3_url
from crawlq.web.headers import REFERRER_POLICIES, parse_header_line

__all__ = [
    "JOB_NAME_RULE",
    "MAX_S",
    "REDIS_BROKER_SCHEMES",
    "REDIS_TCP_SCHEMES",
    "REDIS_URL_SCHEMES",
    "check",
    "check_frontier",
    "check_job_name",
    "check_store",
    "is_redis_broker",
    "is_redis_url",
]

MAX_S = 1e7
"""Largest value of any setting in seconds (about 115 days): larger ones are typos, and
would overflow the frontier's integer milliseconds."""


def check(values: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the field values of a `crawlq.settings.Settings` being constructed.

    Args:
        values: Every field's value by name, in declaration order.

    Returns:
        The fields written one way (module docstring), for the `Settings` to take.

    Raises:
        ConfigError: The first setting out of range or malformed; the message names it.
    """
    _numbers(values)
    fixed = _warc_dir(values)
    _signs(values)
    _ranges(values)
    _bounds(values)
    fixed |= _spellings(values)
    _user_agent(values)
    fixed |= _headers(values)
    _proxies(values)
    return fixed


def _numbers(values: Mapping[str, Any]) -> None:
    """Every number finite, no seconds above `MAX_S`, the counts at least 1."""
    for field_name, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(field_name, f"must be a finite number, got {value}")
        if field_name.endswith("_s") and isinstance(value, int | float) and value > MAX_S:
            raise ConfigError(field_name, f"must be at most {MAX_S:g} seconds, got {value}")
    positive = (
        "concurrency",
        "host_concurrency",
        "lease_batch",
        "max_redirects",
        "celery_batch",
        "celery_max_refusals",
        "flush_max_items",
        "breaker_failures",
        "breaker_parks",
        "inbox_max_entry_bytes",
        "max_html_depth",
        "max_links_per_page",
        "stale_after_beats",
    )
    for name in positive:
        if values[name] < 1:
            raise ConfigError(name, f"must be at least 1, got {values[name]}")


def _warc_dir(values: Mapping[str, Any]) -> dict[str, Any]:
    """``warc_dir`` and ``warc_spool_dir`` made absolute (an ``s3://`` URL: checked)."""
    fixed: dict[str, Any] = {}
    spool = values["warc_spool_dir"]
    if spool is not None:
        if not spool.strip():
            raise ConfigError("warc_spool_dir", "must not be empty")
        fixed["warc_spool_dir"] = os.path.abspath(os.path.expanduser(spool))
    warc_dir = values["warc_dir"]
    if warc_dir is None:
        return fixed
    if not warc_dir.strip():
        raise ConfigError("warc_dir", "must not be empty")
    if is_s3_url(warc_dir):
        return fixed | {"warc_dir": parse_s3_url(warc_dir).url}
    if names_a_scheme(warc_dir):
        raise ConfigError(
            "warc_dir", f"{redact(warc_dir)!r:.200}: give a directory or an s3://bucket/prefix URL"
        )
    return fixed | {"warc_dir": os.path.abspath(os.path.expanduser(warc_dir))}


def _signs(values: Mapping[str, Any]) -> None:
    """Delays not negative; timeouts, caps and sizes positive."""
    delays = (
        "delay_s",
        "retry_delay_s",
        "visibility_timeout_s",
        "flush_interval_s",
        "celery_result_expires_s",
    )
    for name in (*delays, "max_retries"):
        if values[name] < 0:
            raise ConfigError(name, f"must not be negative, got {values[name]}")
    for name in (
        "timeout_s",
        "connect_timeout_s",
        "max_body_bytes",
        "retry_max_delay_s",
        "warc_max_size_bytes",
        "max_crawl_delay_s",
        "max_retry_after_s",
        "host_backoff_s",
        "host_backoff_max_s",
        "breaker_cooldown_s",
        "max_delay_s",
        "autothrottle_target_concurrency",
        "parse_timeout_s",
        "heartbeat_s",
    ):
        if values[name] <= 0:
            raise ConfigError(name, f"must be positive, got {values[name]}")


def _ranges(values: Mapping[str, Any]) -> None:
    """Per-process options, the robots.txt lifetime, and settings that need one another."""
    if values["log_format"] not in ("text", "json"):
        raise ConfigError("log_format", f"must be text or json, got {values['log_format']!r}")
    if values["log_interval_s"] <= 0:
        raise ConfigError("log_interval_s", f"must be positive, got {values['log_interval_s']}")
    if values["metrics_port"] is not None and not 0 <= values["metrics_port"] <= 65535:
        raise ConfigError("metrics_port", f"must be in 0..65535, got {values['metrics_port']}")
    if not 0 < values["robots_ttl_s"] <= 86400:
        raise ConfigError(
            "robots_ttl_s", f"must be in (0, 86400] (RFC 9309 §2.4), got {values['robots_ttl_s']}"
        )
    if values["follow_sitemaps"] and not values["obey_robots"]:
        raise ConfigError(
            "follow_sitemaps",
            "reads the Sitemap: lines of robots.txt, which is not fetched when obey_robots "
            "is off (--ignore-robots); give the sitemaps with --sitemap instead",
        )


def _bounds(values: Mapping[str, Any]) -> None:
    """The optional limits: queue bounds, push wait, page, depth and URL-shape limits."""
    for name in ("max_queued", "max_queued_per_host"):
        value = values[name]
        if value is not None and value < 1:
            raise ConfigError(name, f"must be at least 1, got {value}")
    if values["when_full"] not in ("block", "drop-lowest"):
        raise ConfigError("when_full", f"must be block or drop-lowest, got {values['when_full']!r}")
    if values["max_push_wait_s"] is not None and values["max_push_wait_s"] < 0:
        raise ConfigError(
            "max_push_wait_s", f"must not be negative, got {values['max_push_wait_s']}"
        )
    for name in ("max_pages", "max_depth", "max_query_params"):
        value = values[name]
        if value is not None and value < 0:
            raise ConfigError(name, f"must not be negative, got {value}")
    for name in ("max_path_repeats", "max_pages_per_host"):
        value = values[name]
        if value is not None and value < 1:
            raise ConfigError(name, f"must be at least 1 (or none), got {value}")


def _spellings(values: Mapping[str, Any]) -> dict[str, Any]:
    """Names, lists and patterns: checked, and written one way (returned)."""
    params = tuple(p.strip() for p in values["strip_url_params"] if p.strip())
    for param in params:
        if any(c in param for c in "=&;/#"):
            raise ConfigError("strip_url_params", f"not a parameter name or glob: {param!r:.60}")
    if values["job"] is not None:
        check_job_name(values["job"])
    check_store(values["store"])
    methods = tuple(m.strip().upper() for m in values["inbox_methods"])
    for method in methods:
        if not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Z]+", method):
            raise ConfigError("inbox_methods", f"not an HTTP method: {method!r:.40}")
    extensions = _extensions(values["skip_extensions"])
    if values["meta_refresh_max_delay_s"] < 0:
        raise ConfigError(
            "meta_refresh_max_delay_s",
            f"must not be negative, got {values['meta_refresh_max_delay_s']}",
        )
    for name in ("include", "exclude"):
        for pattern in values[name]:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(name, f"bad regex {pattern!r}: {exc}") from exc
    return {"strip_url_params": params, "inbox_methods": methods, "skip_extensions": extensions}


_PRODUCT = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?:/\S*)?(?:\s|$)")
"""A ``User-Agent`` value's first product: a token, optionally ``/version`` (RFC 9110
§10.1.5); its token is what robots.txt groups are matched against (RFC 9309 §2.2.1)."""


def _user_agent(values: Mapping[str, Any]) -> None:
    """``user_agent`` starts with a product token and holds no control character.

    An empty or blank value would leave robots.txt nothing to match (the robots cache
    refuses it) and send no identification; CR, LF or NUL cannot be in a header (RFC 9110
    §5.5).
    """
    value = values["user_agent"]
    if not isinstance(value, str) or not _PRODUCT.match(value):
        raise ConfigError(
            "user_agent",
            f"{value!r:.60} does not start with a product token (RFC 9110 §10.1.5); "
            "give e.g. 'mybot/1.0 (+https://example.com/bot)'",
        )
    if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value):
        raise ConfigError(
            "user_agent", "holds a control character (CR, LF, NUL…) a header may not hold"
        )


def _headers(values: Mapping[str, Any]) -> dict[str, Any]:
    """``default_headers`` checked and written ``Name: value``; a known ``referer_policy``."""
    lines: list[str] = []
    seen: set[str] = set()
    for line in values["default_headers"]:
        try:
            name, value = parse_header_line(line)
        except ValueError as exc:
            raise ConfigError("default_headers", str(exc)) from None
        if name.lower() == "user-agent":
            raise ConfigError(
                "default_headers", "header User-Agent: set user_agent (--user-agent) instead"
            )
        if name.lower() in seen:
            raise ConfigError("default_headers", f"header {name} is given twice")
        seen.add(name.lower())
        lines.append(f"{name}: {value}")
    if values["referer_policy"] not in REFERRER_POLICIES:
        raise ConfigError(
            "referer_policy",
            f"unknown policy {values['referer_policy']!r:.60}; "
            f"one of {', '.join(REFERRER_POLICIES)}",
        )
    return {"default_headers": tuple(lines)}


def _extensions(entries: tuple[str, ...]) -> tuple[str, ...]:
    """``skip_extensions`` lower-cased, without a leading dot, each once, in order.

    Raises:
        ConfigError: An entry is empty or holds a dot, slash or whitespace inside (an
            extension is what follows the last dot of a path: ``gz``, not ``tar.gz``).
    """
    out: dict[str, None] = {}
    for value in entries:
        ext = value.strip().lower().removeprefix(".")
        if not ext or any(c in ext for c in "./\\?#") or len(ext.split()) != 1:
            raise ConfigError(
                "skip_extensions",
                f"not a path extension: {value!r:.40} (give e.g. pdf or gz, without a dot)",
            )
        out[ext] = None
    return tuple(out)


def _proxies(values: Mapping[str, Any]) -> None:
    """Each proxy URL readable (`crawlq.rules.proxies.parse_proxy`), a known rotation, a bench."""
    for url in values["proxies"]:
        try:
            parse_proxy(url)
        except ValueError as exc:
            raise ConfigError("proxies", str(exc)) from None
    if values["proxy_rotation"] not in ("host", "request"):
        raise ConfigError(
            "proxy_rotation", f"must be host or request, got {values['proxy_rotation']!r:.40}"
        )
    if values["proxy_bench_s"] <= 0:
        raise ConfigError("proxy_bench_s", f"must be positive, got {values['proxy_bench_s']}")


# -- job names and store URLs, also checked on their own ------------------------------------------


_JOB_NAME_MAX = 200
_JOB_NAME_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:-]{{0,{_JOB_NAME_MAX - 1}}}")
JOB_NAME_RULE = (
    f"1 to {_JOB_NAME_MAX} ASCII letters, digits and . _ : - starting with a letter or digit"
)
"""What a job name may be: it is spelled into Redis keys (inside the ``{…}`` hash tag and
their SCAN pattern), log lines and worker command lines, so no braces, glob characters,
spaces, control or non-ASCII characters, and no leading dash (it would read as an option)."""


def check_job_name(name: str) -> str:
    """Return ``name`` if it is a valid job name (`JOB_NAME_RULE`).

    Raises:
        ConfigError: ``name`` breaks the rule; the error names the setting ``job``.
    """
    if not _JOB_NAME_RE.fullmatch(name):
        shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
        raise ConfigError("job", f"a job name must be {JOB_NAME_RULE}; got {shown}")
    return name


REDIS_URL_SCHEMES = ("redis://", "rediss://", "unix://")
"""The one spelling of a Redis frontier URL (redis-py's ``Redis.from_url``: TCP, TLS, a Unix
socket). Every command that takes ``--frontier`` and the Celery engine read it from here."""

REDIS_TCP_SCHEMES = ("redis://", "rediss://")
"""The Redis URLs with a host and port (Celery's result backend cannot take ``unix://``)."""

REDIS_BROKER_SCHEMES = ("redis", "rediss", "sentinel")
"""A Celery broker URL's schemes that name a Redis server (kombu's Redis transports)."""

SQLITE_FRONTIER_SUFFIXES = (".db", ".sqlite", ".sqlite3")
"""File names a SQLite frontier is taken from when no scheme is given."""


def is_redis_url(url: str | None) -> TypeGuard[str]:
    """True when ``url`` names a Redis frontier (`REDIS_URL_SCHEMES`): a shared job."""
    return bool(url) and str(url).startswith(REDIS_URL_SCHEMES)


def is_redis_broker(url: str | None) -> TypeGuard[str]:
    """True when ``url`` names a Redis broker (`REDIS_BROKER_SCHEMES`)."""
    return bool(url) and str(url).split("://", 1)[0] in REDIS_BROKER_SCHEMES


def check_frontier(url: str) -> str:
    """Return ``url`` if it names a frontier: a Redis URL, ``sqlite:///PATH`` or a ``*.db`` file.

    Raises:
        ConfigError: Neither; the error names ``frontier``.
    """
    if is_redis_url(url) or url.startswith("sqlite:///") or url.endswith(SQLITE_FRONTIER_SUFFIXES):
        return url
    raise ConfigError("frontier", f"{url!r}: expected redis://host:port/DB or a SQLite file (*.db)")


_STORE_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")
_LIBPQ_KEYS = (
    "host|hostaddr|port|dbname|user|password|passfile|service|options|sslmode|sslcert|sslkey"
    "|sslrootcert|sslpassword|connect_timeout|application_name|target_session_attrs"
    "|channel_binding|gssencmode|krbsrvname|requirepeer|client_encoding|keepalives"
)
_KEY_VALUE = re.compile(rf"(?i)(?:^|\s)(?:{_LIBPQ_KEYS})\s*=")
"""A libpq ``key=value`` connection string: a word of it starts with a libpq keyword and
``=`` (a file name such as ``crawl=1.db`` is still a path)."""


def check_store(store: str) -> str:
    """Return ``store`` if it names a store: a path, ``sqlite:///PATH`` or ``postgresql://…``.

    ``postgres://…`` is accepted too. Anything else is refused rather than taken for a file
    name: a libpq ``key=value`` string (``host=db password=x dbname=y``) would otherwise
    become a SQLite file named after the password. The message never repeats the password.

    Raises:
        ConfigError: Neither a path nor a supported URL; the error names ``store``.
    """
    if store.startswith(_STORE_SCHEMES):
        return store
    if "://" in store or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", store):
        raise ConfigError(
            "store",
            f"unsupported store URL {store!r}: use a file path, sqlite:///PATH or postgresql://…",
        )
    if _KEY_VALUE.search(store):
        raise ConfigError(
            "store",
            "a key=value connection string is neither a file path nor a URL: give "
            "postgresql://USER@HOST:PORT/DB (a password goes after USER and a colon) or a "
            "SQLite file path",
        )
    if not store.strip():
        raise ConfigError("store", f"no file path in store URL {store!r}")
    return store
