"""Where the CLI writes: rich consoles, log lines, and the quiet exit when a reader goes away.

Consoles: rich is imported only when a console is built, so a crawl whose stderr is a file or
a pipe starts without it; a table on stdout fits `table_width` columns unless ``--wide``.
Exit status: `EXIT_BROKEN_PIPE` (141) when standard output was closed by its reader
(``| head``).

Logs: `configure_logging` (levels by ``-v``/``-q``, text or JSON lines, passwords redacted) is
called by the commands only; the library never configures logging on import. Progress lines
go to the `PROGRESS_LOGGER` at INFO and show at the default verbosity.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import time
from typing import TYPE_CHECKING, NoReturn

from crawlq.secrecy import redact

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXIT_BROKEN_PIPE",
    "PROGRESS_LOGGER",
    "JsonFormatter",
    "RedactingFormatter",
    "configure_logging",
    "exit_on_broken_pipe",
    "reset_logging",
    "stderr_console",
    "stdout_console",
    "table_width",
    "terminal_console",
]

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""Exit status (141) of a command whose standard output was closed by its reader (``| head``):
what a shell reports for a standard tool stopped by SIGPIPE, so ``set -o pipefail`` scripts
treat crawlq like ``cat`` or ``grep``, and distinct from 0 (all written) and 1 (an error)."""


def exit_on_broken_pipe() -> NoReturn:
    """End the process quietly because the reader of standard output has gone away.

    Follows the "Note on SIGPIPE" of Python's `signal` docs: standard output is pointed at
    /dev/null so that the interpreter's final flush cannot fail again (and print a second
    error), then the process exits with `EXIT_BROKEN_PIPE`. Nothing is written to stderr.

    Raises:
        SystemExit: Always, with `EXIT_BROKEN_PIPE`.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    sys.exit(EXIT_BROKEN_PIPE)


def stderr_console() -> Console:
    """A rich console on stderr."""
    from rich.console import Console

    return Console(stderr=True)


def stdout_console(*, wide: bool = False) -> Console:
    """A rich console on stdout, for a command whose output is a table (``crawlq status``).

    Its tables fit `table_width` columns (cells wrap); ``wide`` (``--wide``) leaves every
    cell whole on one line, however long the lines get.

    When the reader of stdout goes away (``crawlq status --watch | head``), the command ends
    quietly with `EXIT_BROKEN_PIPE`, like ``crawlq export`` (rich's own default is exit 1).
    """
    from rich.console import Console

    class _StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            exit_on_broken_pipe()

    console = _StdoutConsole()
    if not console.is_terminal:
        # rich's default off a terminal is 80 columns (or COLUMNS, which tools often export as
        # 80), which wraps URLs and host names inside table cells across lines: lines a pipe
        # (grep, a log file) cannot use (QA)
        console.width = max(console.width, OFF_TERMINAL_WIDTH)
    if wide:
        console.width = WIDE_WIDTH
    return console


def table_width(*, wide: bool = False) -> int | None:
    """Columns a table on stdout may take; None with ``wide`` (``--wide``: no limit).

    The terminal's width; off a terminal `OFF_TERMINAL_WIDTH`, or a wider ``COLUMNS``.
    """
    if wide:
        return None
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return max(int(columns) if columns.isdigit() else 0, OFF_TERMINAL_WIDTH)


OFF_TERMINAL_WIDTH = 200
"""Least columns of a table written to a pipe or file (a wider ``COLUMNS`` widens it)."""

WIDE_WIDTH = 100_000
"""Columns of a ``--wide`` table: enough that no cell is ever wrapped."""


def terminal_console() -> Console | None:
    """The console that progress and logs share when stderr is a terminal, else None."""
    return stderr_console() if sys.stderr.isatty() else None


_LEVELS = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}

PROGRESS_LOGGER = "crawlq.progress"
"""The logger of the periodic progress lines (`crawlq.cli.running.log_progress`): at INFO,
shown unless ``-q`` even when the other INFO lines are not (``-v``)."""


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


_QUIET_LIBRARIES = ("botocore", "boto3", "s3transfer", "urllib3", "asyncio")
"""Libraries whose records stay at WARNING or above whatever ``-v`` asks: their DEBUG lines
carry signed request headers (``Authorization``) or are noise about crawlq's own loop."""


_INSTALLED: list[logging.Handler] = []
"""The handler `configure_logging` last put on the root logger (replaced on the next call)."""
_LEVELS_BEFORE: dict[str, int] = {}
"""The levels of the loggers `configure_logging` set, as they were before its first call."""


def configure_logging(verbosity: int, console: Console | None, fmt: str = "text") -> None:
    """Send log records to stderr at a level chosen by ``verbosity``: crawlq's and the spider's.

    -1 (quiet): errors only; 0: warnings (and progress lines); 1: one line per fetched URL;
    2 or more: debug. Through ``console`` (rich) on a terminal; as plain timestamped lines
    when it is None; as JSON lines (`JsonFormatter`) with ``fmt`` ``json``, terminal or not.

    The ``crawlq`` logger and Python's root logger get the same handler and level, so a
    spider's ``self.logger`` (a logger named after the spider, as in Scrapy), its pipelines'
    and any other logger of the user's code log in the same format, redacted, at the same
    verbosity; `_QUIET_LIBRARIES` stay at WARNING. A handler another tool put on the root
    logger (pytest's capture) is left in place.
    """
    if not _INSTALLED:  # the first call: what `reset_logging` puts back
        for name in ("", "crawlq", PROGRESS_LOGGER, *_QUIET_LIBRARIES):
            _LEVELS_BEFORE[name] = logging.getLogger(name or None).level
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
    ours = logging.getLogger("crawlq")
    ours.handlers[:] = [handler]
    ours.setLevel(level)
    ours.propagate = False
    everyone = logging.getLogger()  # one handler on both: ``crawlq`` does not propagate
    for old in _INSTALLED:
        everyone.removeHandler(old)
    _INSTALLED[:] = [handler]
    everyone.addHandler(handler)
    everyone.setLevel(level)
    for name in _QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    # Progress lines are INFO records shown at the default verbosity too (not with -q).
    logging.getLogger(PROGRESS_LOGGER).setLevel(logging.INFO if verbosity >= 0 else level)


def reset_logging() -> None:
    """Undo `configure_logging`: crawlq's records propagate again, the levels are as before.

    For a program (or a test) that runs a command in-process and goes on: its own handlers
    (pytest's capture) see crawlq's records again, whatever ran before.
    """
    everyone = logging.getLogger()
    for handler in _INSTALLED:
        everyone.removeHandler(handler)
    _INSTALLED.clear()
    ours = logging.getLogger("crawlq")
    ours.handlers.clear()
    ours.propagate = True
    for name, level in _LEVELS_BEFORE.items():
        logging.getLogger(name or None).setLevel(level)
    _LEVELS_BEFORE.clear()
