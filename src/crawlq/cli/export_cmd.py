"""``crawlq export``: stream pages, items, dead letters or filtered URLs out of a store."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Literal, TextIO, cast

import click

from crawlq.cli.consoles import exit_on_broken_pipe
from crawlq.cli.export_options import check_readable, format_for
from crawlq.cli.since import since_option, since_s
from crawlq.errors import ConfigError, CrawlqError
from crawlq.export import export as export_records
from crawlq.export.filters import RecordFilter
from crawlq.items.schema import ItemField, item_fields
from crawlq.secrecy import private_opener, redact
from crawlq.spider.item_type import load_item_type
from crawlq.store import open_store

__all__ = ["export"]

What = Literal["pages", "items", "dead", "filtered", "errors"]
Format = Literal["jsonl", "json", "csv"]
_PARQUET_EXTRA = "parquet export needs pyarrow: pip install 'crawlq[parquet]'"


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

    Exit status: 0 when every record was written; 1 when the store cannot be read or the
    output written (one line says why); 2 for bad options; 141 when the reader of standard
    output closed it early (as `| head` does): the export stops there, silently, with the
    status a shell shows for a tool stopped by SIGPIPE.
    """
    fmt = format_for(fmt, output)
    if body and what != "pages":
        raise click.UsageError("--body applies to --what pages only")
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
            rows = asyncio.run(_export_parquet(store, *parquet_args, where, fields))
        else:
            with contextlib.ExitStack() as stack:
                out: TextIO = sys.stdout
                if output is not None:
                    out = stack.enter_context(
                        open(output, "w", encoding="utf-8", newline="", opener=private_opener)
                    )
                export_args = (cast(What, what), cast(Format, fmt), out, since_at, body, csv_raw)
                rows = asyncio.run(_export(store, *export_args, errors_only, where))
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
) -> int:
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
        )
    finally:
        await store.close()


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
) -> int:
    try:
        from crawlq.export.parquet import export_parquet
    except ImportError as exc:
        raise click.ClickException(f"{_PARQUET_EXTRA} ({exc})") from None
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
