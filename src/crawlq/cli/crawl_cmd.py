"""``crawlq crawl``: seed and crawl until done (embedded SQLite by default, or a shared job)."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import click

from crawlq.cli.options import (
    build_settings,
    frontier_options,
    job_options,
    output_options,
    process_options,
)
from crawlq.cli.output import configure_logging, print_summary, terminal_console
from crawlq.cli.running import Runner, run_in_foreground
from crawlq.engine import Crawl
from crawlq.engine.service import MultiProcessCrawl
from crawlq.errors import ConfigError, CrawlqError, InvalidURL
from crawlq.spider import load_spider

__all__ = ["crawl"]


@click.command()
@click.argument("seeds", nargs=-1, metavar="SEED_URL...")
@job_options
@frontier_options(required=False)
@process_options
@click.option(
    "--retry-dead", is_flag=True, help="First requeue the URLs earlier runs dead-lettered."
)
@output_options
def crawl(
    seeds: tuple[str, ...], quiet: bool, verbose: int, retry_dead: bool, **options: Any
) -> None:
    """Crawl SEED_URL... and store every page once.

    With no --frontier, one process crawls with the frontier and results in one SQLite file
    (--store). With --frontier redis://…, the crawl is a job (--job, default derived from the
    seeds) that any number of `crawlq worker` processes can join; this command seeds it and
    works it with --processes local processes (default: one per CPU core) until nothing is
    queued, delayed or in flight anywhere.

    Re-running the same command resumes an interrupted crawl. Exit status: 0 when the crawl
    finished (or stopped at --max-pages), 1 when it could not start or was interrupted,
    2 for bad options or seed URLs.
    """
    console = terminal_console()
    configure_logging(-1 if quiet else verbose, console)
    processes = options["processes"]
    try:
        spider_cls = load_spider(options["spider"])
        settings = build_settings(options, spider_cls)
        if processes is not None and processes < 1:
            raise ConfigError("processes", f"must be at least 1, got {processes}")
        if settings.frontier is None and processes not in (None, 1):
            raise ConfigError("processes", "several processes need a shared --frontier")
        if settings.frontier is not None and processes is None:
            processes = os.cpu_count() or 1
        crawl_run = Crawl(settings, seeds, spider_cls, retry_dead=retry_dead)
        runner: Runner = crawl_run
        if processes is not None and processes > 1:
            args = ["--concurrency", str(settings.concurrency)]
            args += ["-" + "v" * verbose] if verbose else ["-q"]  # the children print no summary
            runner = MultiProcessCrawl(
                crawl_run.settings, crawl_run.start_requests, processes, args, retry_dead=retry_dead
            )
    except InvalidURL as exc:
        raise click.BadParameter(str(exc), param_hint="SEED_URL") from None
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        show = console if not quiet else None
        report = asyncio.run(run_in_foreground(runner, show))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except CrawlqError as exc:
        click.echo(f"crawlq: cannot crawl: {exc}", err=True)
        sys.exit(1)
    print_summary(report, sys.stdout)
    if report.stopped_by == "stopped":
        sys.exit(1)
