"""CSV cells: how a value is written, and the guard against formula injection.

None is an empty cell, strings are written as they are, and any other value as JSON
(``true``, ``1.5``, ``[1, 2]``).

Cells are neutralised against formula injection (OWASP "CSV injection") unless
``escape_formulas`` is false: a text cell (header names included) that starts with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return, and is not a plain number, gets a ``'``
prefix, so a spreadsheet shows it as text instead of evaluating ``=cmd|' /C calc'!A0``.
JSON Lines and Parquet keep every value as it is.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable
from typing import Any, TextIO

__all__ = ["CsvWriter", "cell_texts", "json_text", "neutralise"]

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula (OWASP)."""
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def json_text(value: Any) -> str:
    """``value`` as JSON text, non-ASCII characters as they are."""
    return json.dumps(value, ensure_ascii=False)


def neutralise(cell: str) -> str:
    """``cell`` with a ``'`` prefix when a spreadsheet would evaluate it as a formula.

    Text starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, except plain
    numbers such as ``-1.5``, which a spreadsheet reads as the number they are.
    """
    if cell.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


class CsvWriter:
    """``csv.writer`` whose rows are neutralised (`neutralise`) when ``escape`` is set."""

    def __init__(self, out: TextIO, escape: bool) -> None:
        self._writer = csv.writer(out)
        self._escape = escape

    def writerow(self, row: Iterable[str]) -> None:
        """Write one row."""
        self._writer.writerow([neutralise(c) for c in row] if self._escape else list(row))


def cell_texts(values: Iterable[Any]) -> list[str]:
    """Values as CSV cell text (module docstring), before `neutralise`."""
    return ["" if v is None else v if isinstance(v, str) else json_text(v) for v in values]
