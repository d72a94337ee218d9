"""The ``crawlq`` command line: commands parse their options, call the API and print.

This module stays light: the commands (and everything they import) load inside `main`, so
a Ctrl-C during start-up is handled like any other.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Console-script entry point.

    A Ctrl-C that lands before a command has installed its own handler (while Python is
    still importing) exits quietly with status 130 instead of printing a traceback.
    """
    try:
        from crawlq.cli.app import cli

        cli()
    except KeyboardInterrupt:
        sys.exit(130)
