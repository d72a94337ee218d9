"""``crawlq reparse``: rerun a (fixed) spider over the stored responses; no HTTP request."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import click

from crawlq.cli.option_settings import build_settings
from crawlq.cli.reports import EXIT_SPIDER_ERRORS, kinds
from crawlq.cli.terminal import configure_logging
from crawlq.errors import ConfigError, CrawlqError
from crawlq.ops.reparse import Reparse, ReparseReport
from crawlq.secrecy import redact
from crawlq.settings import Settings
from crawlq.spider import Spider, load_spider, new_spider
from crawlq.spider.item_type import items_table_of
from crawlq.store import StoreCounts, open_store

__all__ = ["reparse"]


@click.command()
@click.option(
    "--store", default=None, help="The store: a SQLite file [crawlq.db] or postgresql://…"
)
@click.option("--spider", default=None, help="The spider to run: module:Class or file.py:Class.")
@click.option(
    "--errors-only", is_flag=True, help="Only the pages whose callback failed (spider_error)."
)
@click.option(
    "--warc",
    "warc_dir",
    default=None,
    metavar="DIR|s3://BUCKET/PREFIX",
    help="Read the pages stored without a body from their WARC records in DIR or the object "
    "store (the crawl's --warc).",
)
@click.option(
    "--all-spiders",
    is_flag=True,
    help="Also the pages a spider of another name parsed (default: only this spider's).",
)
@click.option(
    "--fail-on-spider-errors",
    is_flag=True,
    help=f"Exit {EXIT_SPIDER_ERRORS} when a reparsed page still has a spider error.",
)
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML settings.")
@click.option("-q", "--quiet", is_flag=True, help="Errors only on stderr.")
@click.option("-v", "--verbose", count=True, help="-v: more log lines; -vv: debug.")
def reparse(
    errors_only: bool,
    all_spiders: bool,
    fail_on_spider_errors: bool,
    quiet: bool,
    verbose: int,
    **options: Any,
) -> None:
    """Run the spider's callbacks again over the responses the store kept, fetching nothing.

    For a crawl run with --store-body (bodies in the store) or --warc DIR (give the same DIR
    here): after fixing a spider that raised on some pages, `crawlq reparse --spider
    S --errors-only` reruns it on those pages and replaces each page's items and error (as
    often as you like: the same pages give the same store). Each page goes to the callback
    its request named. The spider is this command's --spider, never one named by the store;
    pages that a spider of another name parsed are left alone unless --all-spiders.

    Requests the callbacks yield are counted, not followed: reparse sends no HTTP request.
    Pages kept without a body (and not in a WARC file) cannot be reparsed: crawl them again.

    Exit status: 0 when every selected page was reparsed (pages that still fail are listed
    by `crawlq export --what errors`); 3 with --fail-on-spider-errors when any still fails;
    1 when the store or a WARC file cannot be read, or on Ctrl-C; 2 for bad options.
    """
    configure_logging(-1 if quiet else verbose, None)
    try:
        spider_cls = load_spider(options["spider"])
        settings = build_settings(options, spider_cls)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if "://" not in settings.store and not Path(settings.store).is_file():
        raise click.BadParameter(f"no such store file: {settings.store}", param_hint="--store")
    try:
        report, counts = asyncio.run(
            _run(settings, spider_cls, errors_only=errors_only, all_spiders=all_spiders)
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except CrawlqError as exc:
        click.echo(redact(f"crawlq: cannot reparse: {exc}"), err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(1)
    _print_report(report, counts, sys.stdout)
    if report.stopped:
        click.echo("crawlq: reparse interrupted: re-run the same command to finish", err=True)
        sys.exit(1)
    if fail_on_spider_errors and report.failing:
        sys.exit(EXIT_SPIDER_ERRORS)


async def _run(
    settings: Settings, spider_cls: type[Spider], *, errors_only: bool, all_spiders: bool
) -> tuple[ReparseReport, StoreCounts]:
    store = await open_store(settings.store, items_table=items_table_of(settings, spider_cls))
    try:
        job = Reparse(
            store,
            new_spider(spider_cls),
            settings,
            errors_only=errors_only,
            all_spiders=all_spiders,
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, job.stop)
        try:
            report = await job.run()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
        return report, await store.counts()
    finally:
        await store.close()


def _print_report(r: ReparseReport, counts: StoreCounts, out: TextIO) -> None:
    """The summary, as plain ``key: value`` lines (stdout)."""
    lines = [
        f"reparsed {r.reparsed} of {r.seen} pages, {r.updated} updated in the store"
        f" ({r.elapsed_s:.1f}s, no HTTP request)",
        f"spider errors fixed: {r.fixed}, still failing: {_kinds_line(r.failing)}",
        f"items written: {r.items}",
        f"requests yielded by callbacks: {r.requests} (not followed: reparse crawls nothing)",
    ]
    skipped = []
    if r.no_body:
        why = "no body kept (crawl with --store-body or --warc to keep them)"
        if r.no_warc_dir:
            why += f"; {r.no_warc_dir} of them are in WARC files: give --warc DIR"
        skipped.append(f"{r.no_body} {why}")
    if r.unreadable:
        skipped.append(f"{r.unreadable} with an unreadable WARC record (logged)")
    if r.other_spider:
        skipped.append(
            f"{sum(r.other_spider.values())} parsed by another spider "
            f"({kinds(r.other_spider)}; --all-spiders takes them too)"
        )
    if r.not_parsed:
        statuses = {str(k): v for k, v in r.not_parsed.items()}
        skipped.append(
            f"{sum(r.not_parsed.values())} whose status reaches no callback ({kinds(statuses)})"
        )
    if r.refreshes:
        skipped.append(f"{r.refreshes} meta refreshes (followed as redirects, never parsed)")
    if r.changed:
        skipped.append(f"{r.changed} fetched again meanwhile (the newer fetch was kept)")
    if skipped:
        lines.append("skipped: " + "; ".join(skipped))
    lines.append(f"spider errors in store: {_kinds_line(counts.spider_errors_by_type)}")
    out.write("\n".join(lines) + "\n")


def _kinds_line(counts: Mapping[str, int]) -> str:
    return f"{sum(counts.values())} ({kinds(counts)})" if counts else "0"
