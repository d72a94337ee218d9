"""``crawlq crawl -o FILE`` / ``-O FILE``: write the run's items (or pages) when it ends.

The format comes from the extension as for ``crawlq export -o`` (`format_for`): ``.jsonl``
(``.ndjson``), ``.json`` (one JSON array), ``.csv``, ``.parquet``. Everything is checked
before the crawl starts, naming the file: an extension that names no format, ``-o`` (append)
to a ``.json`` array or a ``.parquet`` file that already holds data (use ``-O``), a CSV file
to append to whose columns are not those of the rows, a missing directory, or Parquet
without pyarrow. The rows are written by `crawlq.export` (the code of ``crawlq export``),
from the store, once the crawl has ended: the records this run stored (those from the time
the command started on, as ``export --since`` reads them).
"""

from __future__ import annotations

import asyncio
import csv
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar

import click

from crawlq.cli.export_options import format_for
from crawlq.errors import CrawlqError
from crawlq.export import export
from crawlq.items.schema import ItemField, item_fields
from crawlq.secrecy import private_opener, redact
from crawlq.store import open_store

__all__ = ["CrawlOutput", "crawl_output_options"]

F = TypeVar("F", bound=Callable[..., Any])


def crawl_output_options(f: F) -> F:
    """``-o``, ``-O`` and ``--output-what`` (``crawlq crawl``)."""
    decorators = [
        click.option(
            "-o",
            "--output",
            "append_to",
            type=click.Path(dir_okay=False),
            default=None,
            help="When the crawl ends, append its items to FILE (.jsonl, .json, .csv, .parquet).",
        ),
        click.option(
            "-O",
            "--overwrite-output",
            "overwrite",
            type=click.Path(dir_okay=False),
            default=None,
            help="When the crawl ends, write its items to FILE, replacing it (.jsonl, .json, "
            ".csv, .parquet).",
        ),
        click.option(
            "--output-what",
            type=click.Choice(["items", "pages"]),
            default="items",
            show_default=True,
            help="What -o/-O write.",
        ),
    ]
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


@dataclass(slots=True)
class CrawlOutput:
    """Where and how a crawl writes its records once it ends (module docstring)."""

    path: Path
    fmt: str
    append: bool
    what: Literal["items", "pages"]
    started_at: float = field(default_factory=time.time)
    csv_header: list[str] | None = None
    item_fields: tuple[ItemField, ...] | None = None
    """The declared item type's fields: a ``.parquet`` items file gets typed columns."""

    def declare(self, item_type: type | None) -> None:
        """Type the columns of a Parquet items output by ``item_type`` (None: one JSON column)."""
        if item_type is not None and self.fmt == "parquet" and self.what == "items":
            self.item_fields = item_fields(item_type)

    @classmethod
    def of(cls, append_to: str | None, overwrite: str | None, what: str) -> CrawlOutput | None:
        """The output the options ask for, checked (None: neither -o nor -O).

        Raises:
            click.UsageError: Both given, ``--output-what`` given without either, or the
                file cannot take the rows (module docstring).
        """
        if append_to is not None and overwrite is not None:
            raise click.UsageError("give -o FILE (append) or -O FILE (overwrite), not both")
        name = append_to if append_to is not None else overwrite
        if name is None:
            if _given("output_what"):  # never silently ignored
                raise click.UsageError(f"--output-what {what} needs -o FILE or -O FILE")
            return None
        flag = "-o" if append_to is not None else "-O"
        try:
            fmt = format_for(None, name)
        except click.UsageError:
            raise click.UsageError(
                f"{flag} {name}: cannot tell the format from its extension: name the file "
                ".jsonl, .ndjson, .json, .csv or .parquet"
            ) from None
        output = cls(
            Path(name), fmt, append_to is not None, "pages" if what == "pages" else "items"
        )
        output._check(flag)
        return output

    def _check(self, flag: str) -> None:
        """Refuse, before the crawl, what could not be written after it."""
        name = str(self.path)
        if not self.path.parent.is_dir():
            raise click.UsageError(f"{flag} {name}: directory {self.path.parent} does not exist")
        if self.fmt == "parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise click.UsageError(
                    f"{flag} {name}: Parquet needs pyarrow: pip install 'crawlq[parquet]'"
                ) from None
        has_data = self.path.is_file() and self.path.stat().st_size > 0
        if self.append and has_data and self.fmt in ("json", "parquet"):
            kind = "a JSON array" if self.fmt == "json" else "a Parquet file"
            raise click.UsageError(
                f"-o {name}: cannot append to {kind} that already holds data; use -O {name} "
                "to replace it, or a .jsonl or .csv file to append to"
            )
        if self.append and has_data and self.fmt == "csv":
            with open(self.path, encoding="utf-8", newline="") as f:
                self.csv_header = next(csv.reader(f), None)

    def write(self, store_url: str) -> int:
        """Write this run's records from the store; exit 1 with one line when it cannot."""
        try:
            return asyncio.run(self._write(store_url))
        except (CrawlqError, ValueError) as exc:
            click.echo(redact(f"crawlq: cannot write {self.path}: {exc}"), err=True)
        except OSError as exc:
            click.echo(f"crawlq: cannot write {self.path}: {exc.strerror or exc}", err=True)
        raise SystemExit(1)

    def _open(self) -> TextIO:
        """The output file, created ``0600`` (`crawlq.secrecy.private_opener`) if new."""
        if self.append:
            return open(self.path, "a", encoding="utf-8", newline="", opener=private_opener)
        return open(self.path, "w", encoding="utf-8", newline="", opener=private_opener)

    async def _write(self, store_url: str) -> int:
        store = await open_store(store_url, read_only=True)
        try:
            if self.fmt == "parquet":
                from crawlq.export.parquet import export_parquet

                return await export_parquet(
                    store, self.what, self.path, since=self.started_at, item_fields=self.item_fields
                )
            fmt: Literal["jsonl", "json", "csv"] = (
                "csv" if self.fmt == "csv" else "json" if self.fmt == "json" else "jsonl"
            )
            with self._open() as out:
                return await export(
                    store, self.what, fmt, out, since=self.started_at, csv_header=self.csv_header
                )
        finally:
            await store.close()


def _given(param: str) -> bool:
    """Whether the current command's ``param`` was given (command line or environment)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    source = ctx.get_parameter_source(param)
    return source not in (None, click.core.ParameterSource.DEFAULT)
