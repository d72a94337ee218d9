"""``--since``: one reading of a time bound for every command that takes one.

`parse_since` turns an ISO 8601 time (UTC unless it says otherwise) or an age (``90s``,
``30m``, ``2h``, ``7d``) into Unix seconds; `since_option` is the ``--since`` option that
``crawlq export``, ``dead list`` and ``dead replay`` share, and `since_s` reads its value, or
raises the ``click.BadParameter`` that names ``--since``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

__all__ = ["SINCE_FORMS", "parse_since", "since_option", "since_s"]

F = TypeVar("F", bound=Callable[..., Any])

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

SINCE_FORMS = "an ISO 8601 time (UTC unless it says otherwise) or an age (30m, 2h, 7d)"
"""What ``--since`` accepts, as its help text and error message say it."""


def parse_since(value: str, now_s: float) -> float:
    """``--since`` as Unix seconds.

    An ISO 8601 time (``2026-12-01``, ``2026-12-01T10:00:00Z``; UTC unless it says
    otherwise) or an age before ``now_s`` (``90s``, ``30m``, ``2h``, ``7d``; decimals
    allowed: ``1.5h``).

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


def since_s(since: str | None) -> float | None:
    """The ``--since`` value as Unix seconds (None: no lower bound), an age counted from now.

    Raises:
        click.BadParameter: Neither a time nor an age; the message names ``--since``.
    """
    if since is None:
        return None
    try:
        return parse_since(since, time.time())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from None


def since_option(what: str) -> Callable[[F], F]:
    """The ``--since`` option; ``what`` says what it selects (``records``, ``dead-lettered``)."""
    return click.option(
        "--since",
        default=None,
        metavar="TIME|AGE",
        help=f"Only {what} since this time: {SINCE_FORMS}.",
    )
