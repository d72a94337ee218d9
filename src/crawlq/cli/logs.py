"""Logging for the CLI: levels by ``-v``/``-q``, text or JSON lines, passwords redacted.

`configure_logging` is called by the commands only; the library never configures logging on
import. Progress lines go to the `PROGRESS_LOGGER` at INFO and show at the default verbosity.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TYPE_CHECKING

from crawlq.secrecy import redact

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["PROGRESS_LOGGER", "JsonFormatter", "RedactingFormatter", "configure_logging"]

_LEVELS = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}

PROGRESS_LOGGER = "crawlq.progress"
"""The logger of the periodic progress lines (`crawlq.cli.running`): at INFO, shown unless
``-q`` even when the other INFO lines are not (``-v``)."""


class RedactingFormatter(logging.Formatter):
    """A formatter whose lines (tracebacks included) never show a password (`redact`)."""

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record, passwords redacted."""
        return redact(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, for log pipelines (``--log-format json``).

    Keys: ``time`` (ISO 8601 UTC, milliseconds), ``level``, ``logger``, ``message``, then the
    record's structured fields when it has them (``extra={"crawlq": {...}}``: a fetch line's
    ``method``, ``url``, ``status``, ``bytes``, ``seconds``, ``attempt``; a progress line's
    ``pages``, ``pages_per_s``, ``queued``, ``in_flight``, ``delayed``, ``errors``), and
    ``exception`` with the traceback. Passwords are redacted as in text lines (`redact`).
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, object] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "crawlq", None)
        if isinstance(fields, dict):
            out.update({k: v for k, v in fields.items() if k not in out})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(out, ensure_ascii=False, default=str))


def configure_logging(verbosity: int, console: Console | None, fmt: str = "text") -> None:
    """Send crawlq's log records to stderr at a level chosen by ``verbosity``.

    -1 (quiet): errors only; 0: warnings (and progress lines); 1: one line per fetched URL;
    2 or more: debug. Through ``console`` (rich) on a terminal; as plain timestamped lines
    when it is None; as JSON lines (`JsonFormatter`) with ``fmt`` ``json``, terminal or not.
    """
    level = _LEVELS.get(verbosity, logging.DEBUG)
    if fmt == "json":
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
    elif console is not None and console.is_terminal:
        from rich.logging import RichHandler

        handler = RichHandler(console=console, show_path=False, rich_tracebacks=False, markup=False)
        handler.setFormatter(RedactingFormatter("%(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("crawlq")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    # Progress lines are INFO records shown at the default verbosity too (not with -q).
    logging.getLogger(PROGRESS_LOGGER).setLevel(logging.INFO if verbosity >= 0 else level)
