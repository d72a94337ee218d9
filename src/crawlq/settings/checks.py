"""The checks every `Settings` passes on construction: ranges, formats, cross-field rules.

`check` raises `ConfigError` naming the setting (and the value) at the first failure, and
normalises the few fields that have one spelling (``warc_dir`` made absolute,
``strip_url_params``, ``inbox_methods`` and ``skip_extensions`` cleaned). Seconds above
`MAX_S` are refused as typos.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import TYPE_CHECKING

from crawlq.errors import ConfigError
from crawlq.settings.job_name import check_job_name
from crawlq.settings.store_url import check_store
from crawlq.web.headers import REFERRER_POLICIES, parse_header_line

if TYPE_CHECKING:
    from crawlq.settings.model import Settings

__all__ = ["MAX_S", "check"]

MAX_S = 1e7
"""Largest value of any setting in seconds (about 115 days): larger ones are typos, and
would overflow the frontier's integer milliseconds."""


def check(settings: Settings) -> None:
    """Validate (and normalise, in place) a `Settings` being constructed.

    Raises:
        ConfigError: The first setting out of range or malformed; the message names it.
    """
    _numbers(settings)
    _warc_dir(settings)
    _signs(settings)
    _ranges(settings)
    _bounds(settings)
    _spellings(settings)
    _user_agent(settings)
    _headers(settings)
    _proxies(settings)


def _numbers(settings: Settings) -> None:
    """Every number finite, no seconds above `MAX_S`, the counts at least 1."""
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f.name, f"must be a finite number, got {value}")
        if f.name.endswith("_s") and isinstance(value, int | float) and value > MAX_S:
            raise ConfigError(f.name, f"must be at most {MAX_S:g} seconds, got {value}")
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
        if getattr(settings, name) < 1:
            raise ConfigError(name, f"must be at least 1, got {getattr(settings, name)}")


def _warc_dir(settings: Settings) -> None:
    if settings.warc_dir is not None:
        if not settings.warc_dir.strip():
            raise ConfigError("warc_dir", "must not be empty")
        path = os.path.abspath(os.path.expanduser(settings.warc_dir))
        object.__setattr__(settings, "warc_dir", path)


def _signs(settings: Settings) -> None:
    """Delays not negative; timeouts, caps and sizes positive."""
    delays = (
        "delay_s",
        "retry_delay_s",
        "visibility_timeout_s",
        "flush_interval_s",
        "celery_result_expires_s",
    )
    for name in (*delays, "max_retries"):
        if getattr(settings, name) < 0:
            raise ConfigError(name, f"must not be negative, got {getattr(settings, name)}")
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
        if getattr(settings, name) <= 0:
            raise ConfigError(name, f"must be positive, got {getattr(settings, name)}")


def _ranges(settings: Settings) -> None:
    """Per-process options, the robots.txt lifetime, and settings that need one another."""
    if settings.log_format not in ("text", "json"):
        raise ConfigError("log_format", f"must be text or json, got {settings.log_format!r}")
    if settings.log_interval_s <= 0:
        raise ConfigError("log_interval_s", f"must be positive, got {settings.log_interval_s}")
    if settings.metrics_port is not None and not 0 <= settings.metrics_port <= 65535:
        raise ConfigError("metrics_port", f"must be in 0..65535, got {settings.metrics_port}")
    if not 0 < settings.robots_ttl_s <= 86400:
        raise ConfigError(
            "robots_ttl_s", f"must be in (0, 86400] (RFC 9309 §2.4), got {settings.robots_ttl_s}"
        )
    if settings.follow_sitemaps and not settings.obey_robots:
        raise ConfigError(
            "follow_sitemaps",
            "reads the Sitemap: lines of robots.txt, which is not fetched when obey_robots "
            "is off (--ignore-robots); give the sitemaps with --sitemap instead",
        )


def _bounds(settings: Settings) -> None:
    """The optional limits: queue bounds, push wait, page, depth and URL-shape limits."""
    for name in ("max_queued", "max_queued_per_host"):
        value = getattr(settings, name)
        if value is not None and value < 1:
            raise ConfigError(name, f"must be at least 1, got {value}")
    if settings.when_full not in ("block", "drop-lowest"):
        raise ConfigError("when_full", f"must be block or drop-lowest, got {settings.when_full!r}")
    if settings.max_push_wait_s is not None and settings.max_push_wait_s < 0:
        raise ConfigError(
            "max_push_wait_s", f"must not be negative, got {settings.max_push_wait_s}"
        )
    for name in ("max_pages", "max_depth", "max_query_params"):
        value = getattr(settings, name)
        if value is not None and value < 0:
            raise ConfigError(name, f"must not be negative, got {value}")
    for name in ("max_path_repeats", "max_pages_per_host"):
        value = getattr(settings, name)
        if value is not None and value < 1:
            raise ConfigError(name, f"must be at least 1 (or none), got {value}")


def _spellings(settings: Settings) -> None:
    """Names, lists and patterns: checked, and written one way (in place)."""
    params = tuple(p.strip() for p in settings.strip_url_params if p.strip())
    for param in params:
        if any(c in param for c in "=&;/#"):
            raise ConfigError("strip_url_params", f"not a parameter name or glob: {param!r:.60}")
    object.__setattr__(settings, "strip_url_params", params)
    if settings.job is not None:
        check_job_name(settings.job)
    check_store(settings.store)
    methods = tuple(m.strip().upper() for m in settings.inbox_methods)
    for method in methods:
        if not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Z]+", method):
            raise ConfigError("inbox_methods", f"not an HTTP method: {method!r:.40}")
    object.__setattr__(settings, "inbox_methods", methods)
    object.__setattr__(settings, "skip_extensions", _extensions(settings.skip_extensions))
    if settings.meta_refresh_max_delay_s < 0:
        raise ConfigError(
            "meta_refresh_max_delay_s",
            f"must not be negative, got {settings.meta_refresh_max_delay_s}",
        )
    for name in ("include", "exclude"):
        for pattern in getattr(settings, name):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(name, f"bad regex {pattern!r}: {exc}") from exc


_PRODUCT = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?:/\S*)?(?:\s|$)")
"""A ``User-Agent`` value's first product: a token, optionally ``/version`` (RFC 9110
§10.1.5); its token is what robots.txt groups are matched against (RFC 9309 §2.2.1)."""


def _user_agent(settings: Settings) -> None:
    """``user_agent`` starts with a product token and holds no control character.

    An empty or blank value would leave robots.txt nothing to match (the robots cache
    refuses it) and send no identification; CR, LF or NUL cannot be in a header (RFC 9110
    §5.5).
    """
    value = settings.user_agent
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


def _headers(settings: Settings) -> None:
    """``default_headers`` checked and written ``Name: value``; a known ``referer_policy``."""
    lines: list[str] = []
    seen: set[str] = set()
    for line in settings.default_headers:
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
    object.__setattr__(settings, "default_headers", tuple(lines))
    if settings.referer_policy not in REFERRER_POLICIES:
        raise ConfigError(
            "referer_policy",
            f"unknown policy {settings.referer_policy!r:.60}; "
            f"one of {', '.join(REFERRER_POLICIES)}",
        )


def _extensions(values: tuple[str, ...]) -> tuple[str, ...]:
    """``skip_extensions`` lower-cased, without a leading dot, each once, in order.

    Raises:
        ConfigError: An entry is empty or holds a dot, slash or whitespace inside (an
            extension is what follows the last dot of a path: ``gz``, not ``tar.gz``).
    """
    out: dict[str, None] = {}
    for value in values:
        ext = value.strip().lower().removeprefix(".")
        if not ext or any(c in ext for c in "./\\?#") or len(ext.split()) != 1:
            raise ConfigError(
                "skip_extensions",
                f"not a path extension: {value!r:.40} (give e.g. pdf or gz, without a dot)",
            )
        out[ext] = None
    return tuple(out)


def _proxies(settings: Settings) -> None:
    """Each proxy URL readable (`crawlq.rules.proxies.parse_proxy`), a known rotation, a bench."""
    from crawlq.rules.proxies import parse_proxy

    for url in settings.proxies:
        try:
            parse_proxy(url)
        except ValueError as exc:
            raise ConfigError("proxies", str(exc)) from None
    if settings.proxy_rotation not in ("host", "request"):
        raise ConfigError(
            "proxy_rotation", f"must be host or request, got {settings.proxy_rotation!r:.40}"
        )
    if settings.proxy_bench_s <= 0:
        raise ConfigError("proxy_bench_s", f"must be positive, got {settings.proxy_bench_s}")
