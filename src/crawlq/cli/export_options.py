"""``crawlq export``'s option checks: the output format, ``--since`` and ``--store``.

``--since`` is read as ``crawlq dead list`` reads it (`crawlq.cli.since.since_s`).

Each raises the click error that names its option (``click.UsageError`` for a format that
cannot be told or contradicts ``-o FILE``'s extension, ``click.BadParameter`` otherwise), so a
bad option exits 2 before any store is opened.
"""

from __future__ import annotations

from pathlib import Path

import click

from crawlq.errors import ConfigError
from crawlq.settings import check_store

__all__ = ["check_readable", "format_for"]


def check_readable(store: str) -> None:
    """Refuse a ``--store`` that is not a store URL or path, or a store file that is missing.

    Raises:
        click.BadParameter: Why, naming ``--store``.
    """
    try:
        check_store(store)
    except ConfigError as exc:
        raise click.BadParameter(str(exc).removeprefix("store: "), param_hint="--store") from None
    if "://" not in store and not Path(store).is_file():
        raise click.BadParameter(f"no such store file: {store}", param_hint="--store")


_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
}
"""File extensions that name an export format (``-o pages.csv`` means ``--format csv``)."""


def format_for(fmt: str | None, output: str | None) -> str:
    """The export format: ``--format``, else the one ``-o FILE``'s extension names.

    Standard output with no ``--format`` gets JSON Lines. A file whose extension names no
    format needs ``--format``, and one whose extension names another format than
    ``--format`` is refused: either way a ``.csv`` file never holds JSON Lines.

    Raises:
        click.UsageError: The format cannot be told, or contradicts the extension.
    """
    if output is None:
        return fmt or "jsonl"
    suffix = Path(output).suffix.lower()
    implied = _EXTENSIONS.get(suffix)
    if fmt is None:
        if implied is None:
            known = ", ".join(_EXTENSIONS)
            raise click.UsageError(
                f"cannot tell the format of {output!r} from its extension: give --format "
                f"jsonl|json|csv|parquet, or name the file with one of {known}"
            )
        return implied
    if implied is not None and implied != fmt:
        raise click.UsageError(
            f"--format {fmt} but {output!r} is named like a {implied} file: "
            f"give -o FILE with a matching extension, or leave --format out"
        )
    return fmt
