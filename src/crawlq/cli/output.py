"""Terminal output for the CLI, in one import: consoles, logging, the summary, tables.

The names live in small modules of their own, re-exported here (``from crawlq.cli.output
import ...`` keeps working): `crawlq.cli.consoles` (rich consoles, the broken-pipe exit),
`crawlq.cli.logs` (logging setup, text and JSON formatters), `crawlq.cli.summary` (the
end-of-crawl summary, the spider-errors warning) and `crawlq.cli.tables` (the live display
and the ``status``, ``inspect`` and ``dead list`` tables). Only the ``cli`` package imports
rich, and only when there is a terminal to draw on or a table to print.
"""

from __future__ import annotations

from crawlq.cli.consoles import (
    EXIT_BROKEN_PIPE,
    exit_on_broken_pipe,
    stderr_console,
    stdout_console,
    table_width,
    terminal_console,
)
from crawlq.cli.logs import PROGRESS_LOGGER, JsonFormatter, RedactingFormatter, configure_logging
from crawlq.cli.summary import (
    EXIT_NOTHING_STORED,
    EXIT_SPIDER_ERRORS,
    kinds,
    nothing_stored_line,
    print_summary,
    spider_errors_warning,
)
from crawlq.cli.tables import ProgressDisplay, dead_table, status_table, story_table

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_NOTHING_STORED",
    "EXIT_SPIDER_ERRORS",
    "PROGRESS_LOGGER",
    "JsonFormatter",
    "ProgressDisplay",
    "RedactingFormatter",
    "configure_logging",
    "dead_table",
    "exit_on_broken_pipe",
    "kinds",
    "nothing_stored_line",
    "print_summary",
    "spider_errors_warning",
    "status_table",
    "stderr_console",
    "stdout_console",
    "story_table",
    "table_width",
    "terminal_console",
]
