"""The options ``crawlq dead list`` and ``dead replay`` share, and what they select.

`dead_options` adds the filters (``--reason``, ``--host``, ``--since``), the crawl's location
(``--frontier``, ``--job``, ``--store``) and ``--json``; `dead_filter` turns the filters into a
`crawlq.frontier.inspection.DeadFilter` (``since_ms``: Unix milliseconds), or a
``click.BadParameter`` naming the option. ``--since`` is read by `crawlq.cli.since` (as for
``crawlq export``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from crawlq.cli.since import since_option, since_s
from crawlq.errors import CrawlqError
from crawlq.frontier.inspection import DeadFilter

__all__ = ["dead_filter", "dead_options"]

F = TypeVar("F", bound=Callable[..., Any])


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
            since_option("dead-lettered"),
            click.option(
                "--frontier",
                default=None,
                help="redis://… (or rediss://, unix://) of a shared job, or a SQLite frontier file "
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
    since_at = since_s(since)
    since_ms = None if since_at is None else round(since_at * 1000)
    return DeadFilter(reason=reason or None, host=host, since_ms=since_ms)
