"""The options ``crawlq dead list`` and ``dead replay`` share, and what they select.

`dead_options` adds the filters (``--reason``, ``--host``, ``--since``), the crawl's location
(``--frontier``, ``--job``, ``--store``) and ``--json``; `dead_filter` turns the filters into a
`crawlq.frontier.base.DeadFilter` (``since_ms``: Unix milliseconds), or a
``click.BadParameter`` naming the option. `parse_since` reads ``--since``: an ISO 8601 time
(UTC unless it says otherwise) or an age (``90s``, ``30m``, ``2h``, ``7d``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from crawlq.errors import CrawlqError
from crawlq.frontier.base import DeadFilter

__all__ = ["dead_filter", "dead_options", "parse_since"]

F = TypeVar("F", bound=Callable[..., Any])

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(value: str, now_s: float) -> float:
    """``--since`` as Unix seconds.

    An ISO 8601 time (``2026-12-01``, ``2026-12-01T10:00:00Z``; UTC unless it says
    otherwise) or an age (``90s``, ``30m``, ``2h``, ``7d``).

    Raises:
        ValueError: Neither form; the message names the value.
    """
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text)
    if match:
        return now_s - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{value!r}: not a time (2026-12-01T10:00:00Z) nor an age (30m, 2h, 7d)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def dead_options(f: F) -> F:
    """Add the shared options of the ``dead`` commands to the command ``f``."""
    for decorator in reversed(
        [
            click.option(
                "--reason", default=None, help="Only this dead-letter reason (http_503…)."
            ),
            click.option(
                "--host",
                default=None,
                help="Only this host (example.com, or host:port; without a port: any port).",
            ),
            click.option(
                "--since",
                default=None,
                help="Only dead-lettered since this time (ISO 8601, UTC) or age (30m, 2h, 7d).",
            ),
            click.option(
                "--frontier",
                default=None,
                help="redis://… of a shared job, or a SQLite frontier file "
                "(default: embedded in --store).",
            ),
            click.option("--job", default=None, help="The job name (with a Redis frontier)."),
            click.option(
                "--store",
                default=None,
                help="A SQLite file [crawlq.db] or postgresql://… (default for a job: its own).",
            ),
            click.option("--json", "as_json", is_flag=True, help="JSON, for scripts."),
        ]
    ):
        f = decorator(f)
    return f


def dead_filter(reason: str | None, host: str | None, since: str | None) -> DeadFilter:
    """The dead letters the options select.

    Raises:
        click.BadParameter: ``--host`` is not a host name or ``--since`` not a time or age.
    """
    if host is not None:
        host = host.strip().lower()
        if "//" in host:  # a URL: its host
            from crawlq.urls import host_key

            try:
                host = host_key(host)
            except CrawlqError as exc:
                raise click.BadParameter(str(exc), param_hint="--host") from None
        if not host or "/" in host or " " in host:
            raise click.BadParameter(f"{host!r}: not a host name", param_hint="--host")
    since_ms = None
    if since is not None:
        try:
            since_ms = round(parse_since(since, time.time()) * 1000)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--since") from None
    return DeadFilter(reason=reason or None, host=host, since_ms=since_ms)
