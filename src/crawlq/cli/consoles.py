"""Rich consoles for the CLI, and the quiet exit of a command whose reader went away.

rich is imported only when a console is built: a crawl whose stderr is a file or a pipe
starts without it. Exit status: `EXIT_BROKEN_PIPE` (141) when standard output was closed
by its reader (``| head``).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXIT_BROKEN_PIPE",
    "exit_on_broken_pipe",
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
