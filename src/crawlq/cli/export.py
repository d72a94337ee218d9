"""Records out of a store into a file: ``crawlq export``, and ``crawlq crawl -o/-O FILE``.

``crawlq export`` streams pages, items, dead letters or filtered URLs out of a store. Its
option checks raise the click error that names the option (``click.UsageError`` for a format
that cannot be told or contradicts ``-o FILE``'s extension, ``click.BadParameter`` otherwise),
so a bad option exits 2 before any store is opened: `format_for` (the format ``--format``
gives, else the one the file's extension names), `check_readable` (``--store``); ``--since``
is read as ``crawlq dead list`` reads it (`crawlq.cli.options.since_s`).

``crawlq crawl -o FILE`` / ``-O FILE`` (`crawl_output_options`, `CrawlOutput`) write the run's
items (or pages) when it ends. The format comes from the extension as for ``crawlq export -o``
(`format_for`): ``.jsonl`` (``.ndjson``), ``.json`` (one JSON array), ``.csv``, ``.parquet``.
Everything is checked before the crawl starts, naming the file: an extension that names no
format, ``-o`` (append) to a ``.json`` array or a ``.parquet`` file that already holds data
(use ``-O``), a CSV file to append to whose columns are not those of the rows, a missing
directory, or Parquet without pyarrow. The rows are written by `crawlq.export` (the code of
``crawlq export``), from the store, once the crawl has ended: the records this run stored
(those from the time the command started on, as ``export --since`` reads them).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar, cast

import click

from crawlq.cli.options import since_option, since_s
from crawlq.cli.terminal import exit_on_broken_pipe
from crawlq.errors import ConfigError, CrawlqError, StoreError
from crawlq.export import export as export_records
from crawlq.export.filters import RecordFilter
from crawlq.export.rows import BodyReader
from crawlq.items.schema import ItemField, item_fields
from crawlq.records import PageRecord
from crawlq.secrecy import private_opener, redact
from crawlq.settings import check_store
from crawlq.settings.archive import is_s3_url, parse_s3_url
from crawlq.spider.item_type import load_item_type
from crawlq.store import open_store

__all__ = ["CrawlOutput", "check_readable", "crawl_output_options", "export", "format_for"]

F = TypeVar("F", bound=Callable[..., Any])

What = Literal["pages", "items", "dead", "filtered", "errors"]
Format = Literal["jsonl", "json", "csv"]
_PARQUET_EXTRA = "parquet export needs pyarrow: pip install 'crawlq[parquet]'"
_MAX_BODY_BYTES = 1 << 30
"""Largest body read back from a WARC record (the crawl's ``max_body_bytes`` bounded it)."""


@click.command()
@click.option("--store", default="crawlq.db", show_default=True, help="Store to read.")
@click.option(
    "--what",
    type=click.Choice(["pages", "items", "dead", "filtered", "errors"]),
    default="pages",
    show_default=True,
    help="errors: the pages whose spider callback failed, with the exception type.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "json", "csv", "parquet"]),
    default=None,
    help="[default: from the -o FILE extension (.jsonl, .ndjson, .json, .csv, .parquet), "
    "else jsonl]; json: one JSON array",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None)
@since_option("records")
@click.option(
    "--body", is_flag=True, help="Pages: include the stored bodies (crawled with --store-body)."
)
@click.option(
    "--warc",
    default=None,
    metavar="DIR|s3://BUCKET/PREFIX",
    help="With --body: read the bodies the store did not keep from the pages' WARC records, "
    "in DIR or the object store (the crawl's --warc).",
)
@click.option("--errors-only", is_flag=True, help="Pages: only those whose spider callback failed.")
@click.option(
    "--csv-raw",
    is_flag=True,
    help="CSV: write cells starting with = + - @ tab or CR as they are (no ' prefix).",
)
@click.option(
    "--status", default=None, help="Pages, errors: only these statuses (200, 4xx, 301,302)."
)
@click.option("--host", default=None, help="Only records of URLs on HOST (or HOST:PORT).")
@click.option("--spider", default=None, help="Pages, items, errors: only this spider's (its name).")
@click.option(
    "--item-type",
    default=None,
    metavar="SPEC",
    help="Parquet items: one typed column per field of this item class (module:Class or "
    "file.py:Class) instead of one JSON column.",
)
def export(
    store: str,
    what: str,
    fmt: str | None,
    output: str | None,
    since: str | None,
    body: bool,
    warc: str | None,
    errors_only: bool,
    csv_raw: bool,
    status: str | None,
    host: str | None,
    spider: str | None,
    item_type: str | None,
) -> None:
    """Write results as JSON Lines, JSON array, CSV or Parquet (to stdout, or to -o FILE).

    Without --format, -o FILE's extension says which (.jsonl, .ndjson, .csv, .parquet);
    standard output gets JSON Lines. Parquet needs -o FILE and the parquet extra (pip
    install 'crawlq[parquet]').

    --what errors lists the pages whose spider callback failed (error_type, error, callback,
    and whether `crawlq reparse` can rerun them from a kept body or WARC record);
    --what pages --errors-only gives the same pages as full page records.

    CSV cells that a spreadsheet would run as a formula (text starting with =, +, -, @, a
    tab or a carriage return, other than plain numbers) get a ' prefix, so that a page
    title such as =cmd|'/C calc'!A0 stays text (OWASP CSV injection); --csv-raw turns this
    off. JSON Lines and Parquet are written as they are.

    --format json (or -o FILE.json) writes one JSON array, streamed, one record per line
    ([] when there is none). --status (200, 4xx, 301,302: pages and errors), --host (HOST
    on any port, or HOST:PORT) and --spider (the spider's name: pages, items, errors) keep
    only the matching records; dead and filtered records have a host only.

    --item-type module:Class (a dataclass, attrs class, pydantic model or TypedDict) makes a
    Parquet items export typed: one column per field instead of one JSON string column.

    --body --warc DIR (or s3://bucket/prefix, the crawl's --warc) adds the bodies of pages
    archived to WARC: each is read from its record (an object's with one ranged GET, using
    the standard AWS variables; files not uploaded yet are read from the spool directory,
    CRAWLQ_WARC_SPOOL_DIR or ~/.cache/crawlq/warc-spool/...).

    Exit status: 0 when every record was written; 1 when the store cannot be read or the
    output written (one line says why); 2 for bad options; 141 when the reader of standard
    output closed it early (as `| head` does): the export stops there, silently, with the
    status a shell shows for a tool stopped by SIGPIPE.
    """
    fmt = format_for(fmt, output)
    if body and what != "pages":
        raise click.UsageError("--body applies to --what pages only")
    _check_warc(warc, body)
    if errors_only and what != "pages":
        raise click.UsageError("--errors-only applies to --what pages only (or use --what errors)")
    if fmt == "parquet" and output is None:
        raise click.UsageError("--format parquet needs -o FILE")
    where = _record_filter(what, status, host, spider)
    fields = _item_fields(item_type, what, fmt)
    since_at = since_s(since)
    check_readable(store)
    try:
        if fmt == "parquet":
            assert output is not None
            parquet_args = (cast(What, what), output, since_at, body, errors_only)
            rows = asyncio.run(_export_parquet(store, *parquet_args, where, fields, warc))
        else:
            with contextlib.ExitStack() as stack:
                out: TextIO = sys.stdout
                if output is not None:
                    out = stack.enter_context(
                        open(output, "w", encoding="utf-8", newline="", opener=private_opener)
                    )
                export_args = (cast(What, what), cast(Format, fmt), out, since_at, body, csv_raw)
                rows = asyncio.run(_export(store, *export_args, errors_only, where, warc))
                out.flush()  # a closed pipe shows here, not in the interpreter's final flush
    except CrawlqError as exc:
        click.echo(redact(f"crawlq: cannot export: {exc}"), err=True)
        sys.exit(1)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) and output is None:
            exit_on_broken_pipe()  # the reader has what it wanted (`| head`): no message
        target = output or "standard output"
        click.echo(f"crawlq: cannot write {target}: {exc.strerror or exc}", err=True)
        sys.exit(1)
    if output is not None:
        click.echo(f"wrote {rows} {what} rows to {output}", err=True)


async def _export(
    store_url: str,
    what: What,
    fmt: Format,
    out: TextIO,
    since: float | None,
    body: bool,
    csv_raw: bool,
    errors_only: bool,
    where: RecordFilter | None = None,
    warc: str | None = None,
) -> int:
    bodies = await _body_reader(warc)
    store = await open_store(store_url, read_only=True)
    try:
        return await export_records(
            store,
            what,
            fmt,
            out,
            since=since,
            with_body=body,
            escape_formulas=not csv_raw,
            spider_errors_only=errors_only,
            where=where,
            bodies=bodies,
        )
    finally:
        await store.close()


def _check_warc(warc: str | None, body: bool) -> None:
    """Refuse a ``--warc`` without ``--body``, a malformed ``s3://`` URL or a missing DIR.

    Raises:
        click.UsageError, click.BadParameter: Which, naming the value (never a credential).
    """
    if warc is None:
        return
    if not body:
        raise click.UsageError("--warc applies with --body only (it reads the bodies)")
    if is_s3_url(warc):
        try:
            parse_s3_url(warc, setting="--warc")
        except ConfigError as exc:
            message = str(exc).removeprefix("--warc: ")
            raise click.BadParameter(message, param_hint="--warc") from None
    elif not Path(warc).is_dir():
        shown = redact(warc)
        raise click.BadParameter(f"no such directory: {shown!r:.200}", param_hint="--warc")


async def _body_reader(warc: str | None) -> BodyReader | None:
    """What reads a page's body from its WARC record in ``warc`` (None: no ``--warc``).

    Raises:
        ConfigError: boto3 is missing (the ``s3`` extra), or warcio (``warc``).
        StoreError: The object store cannot be reached or has no such bucket.
    """
    if warc is None:
        return None
    try:
        from crawlq.store.warc.reader import WarcArchive
    except ImportError as exc:
        raise ConfigError("--warc", f"needs warcio: pip install 'crawlq[warc]' ({exc})") from None
    spool = os.environ.get("CRAWLQ_WARC_SPOOL_DIR") or None
    archive = await asyncio.to_thread(WarcArchive.open, warc, spool_dir=spool)

    async def read(page: PageRecord) -> bytes:
        assert page.warc_file is not None and page.warc_offset is not None
        try:
            record = await asyncio.to_thread(
                archive.read, page.warc_file, page.warc_offset, max_body_bytes=_MAX_BODY_BYTES
            )
        except StoreError as exc:
            raise StoreError(f"the body of {page.url}: {exc}") from None
        return record.body

    return read


def _record_filter(
    what: str, status: str | None, host: str | None, spider: str | None
) -> RecordFilter | None:
    """``--status``, ``--host`` and ``--spider`` as a filter (None when none is given).

    Raises:
        click.UsageError: A bad value, or a filter that ``--what``'s records have no column for.
    """
    try:
        where = RecordFilter(status=status, host=host, spider=spider)
        where.check(what)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return None if where.empty else where


async def _export_parquet(
    store_url: str,
    what: What,
    path: str,
    since: float | None,
    body: bool,
    errors_only: bool,
    where: RecordFilter | None = None,
    fields: tuple[ItemField, ...] | None = None,
    warc: str | None = None,
) -> int:
    try:
        from crawlq.export.parquet import export_parquet
    except ImportError as exc:
        raise click.ClickException(f"{_PARQUET_EXTRA} ({exc})") from None
    bodies = await _body_reader(warc)
    store = await open_store(store_url, read_only=True)
    try:
        return await export_parquet(
            store,
            what,
            path,
            since=since,
            with_body=body,
            spider_errors_only=errors_only,
            where=where,
            item_fields=fields,
            bodies=bodies,
        )
    finally:
        await store.close()


def _item_fields(spec: str | None, what: str, fmt: str) -> tuple[ItemField, ...] | None:
    """The fields ``--item-type`` declares for a typed Parquet items export, or None."""
    if spec is None:
        return None
    if what != "items" or fmt != "parquet":
        raise click.UsageError("--item-type applies to --what items --format parquet only")
    try:
        return item_fields(load_item_type(spec))
    except ConfigError as exc:
        raise click.UsageError(f"--item-type: {str(exc).removeprefix('item_type: ')}") from None


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
    """Where and how ``-o``/``-O`` write a crawl's records once it ends (module docstring)."""

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
                return await export_records(
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
