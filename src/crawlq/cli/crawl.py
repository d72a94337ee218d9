"""``crawlq crawl``: seed and crawl until done (embedded SQLite by default, or a shared job)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sys
from typing import Any

import click

from crawlq.cli.export import CrawlOutput, crawl_output_options
from crawlq.cli.option_settings import build_settings, option_error
from crawlq.cli.options import (
    frontier_options,
    guard_options,
    job_options,
    observe_options,
    output_options,
    process_options,
    sitemap_option,
    sitemap_urls,
)
from crawlq.cli.reports import (
    EXIT_NOTHING_STORED,
    EXIT_SPIDER_ERRORS,
    nothing_stored_line,
    print_summary,
    spider_errors_warning,
)
from crawlq.cli.running import Runner, run_or_exit, supervisor_metrics, worker_metrics
from crawlq.cli.terminal import configure_logging, terminal_console
from crawlq.engine import Crawl
from crawlq.engine.crawl import CrawlReport
from crawlq.engine.local_crawl import LocalProcessesCrawl
from crawlq.engine.multiprocess import MultiProcessCrawl
from crawlq.engine.plan import plan_crawl
from crawlq.errors import ConfigError, InvalidURL
from crawlq.settings import Settings
from crawlq.spider import Spider, load_spider
from crawlq.spider.item_type import declared_item_type
from crawlq.store import open_store

__all__ = ["crawl"]


@click.command()
@click.argument("seeds", nargs=-1, metavar="[SEED_URL]...")
@sitemap_option
@job_options
@guard_options
@frontier_options(required=False)
@process_options
@click.option(
    "--retry-dead", is_flag=True, help="First requeue the URLs earlier runs dead-lettered."
)
@click.option(
    "--engine",
    type=click.Choice(["native", "celery"]),
    default="native",
    help="native: crawlq workers [default]; celery: scrape tasks on Celery workers.",
)
@click.option(
    "--broker",
    default=None,
    metavar="URL",
    help="Celery engine: the broker, redis://… or amqp://… (CRAWLQ_BROKER_URL).",
)
@click.option(
    "--fail-on-spider-errors",
    is_flag=True,
    help=f"Exit {EXIT_SPIDER_ERRORS} when the store holds pages whose spider callback failed "
    "(default: exit 0 with a warning line).",
)
@crawl_output_options
@output_options
@observe_options
def crawl(
    seeds: tuple[str, ...],
    quiet: bool,
    verbose: int,
    retry_dead: bool,
    engine: str,
    broker: str | None,
    fail_on_spider_errors: bool,
    append_to: str | None,
    overwrite: str | None,
    output_what: str,
    **options: Any,
) -> None:
    """Crawl SEED_URL... (and the URLs of each --sitemap) and store every page once.

    With no SEED_URL and no --sitemap, the spider's start_urls (or start_requests) seed it.

    With no --frontier, the frontier and results are one SQLite file (--store), owned by
    this process, which crawls alone unless --processes P asks for more: then, once the
    queue grows past a few dozen URLs, P - 1 more processes fetch and parse while this one
    serves them the file's frontier and store.
    With --frontier redis://…, the crawl is a job (--job, default derived from the seeds)
    that any number of `crawlq worker` processes can join; this command seeds it and works
    it with --processes local processes (default: one per CPU core) until nothing is
    queued, delayed or in flight anywhere.

    With --engine celery, each URL is a `crawlq.scrape` task on the Celery --broker, run by
    `celery -A crawlq.celery worker` processes that you start (or, with --processes P, one
    local Celery worker with P pool processes); dedup and politeness live in Redis (--frontier,
    default the broker when it is Redis). The command seeds and waits until every URL is settled.

    Re-running the same command resumes an interrupted crawl. Exit status: 0 when the crawl
    finished (or stopped at --max-pages), 1 when it could not start or was interrupted,
    2 for bad options or seed URLs, 4 when it stored no page because every seed failed
    (one line gives the dead-letter reasons). Pages whose spider callback raised are stored
    with their error and counted by exception type; they leave the exit status 0 with a
    warning line (`crawlq export --what errors` lists them, `crawlq reparse` reruns a fixed
    spider over their kept bodies), or make it 3 with --fail-on-spider-errors.

    -o FILE appends the items this run stored to FILE when the crawl ends (-O FILE replaces
    it; --output-what pages writes the pages instead), in the format of its extension:
    .jsonl, .json (one JSON array), .csv (appended rows follow its header), .parquet. A
    .json or .parquet file that holds data takes -O only; a file that cannot take the rows
    is refused before the crawl starts.
    """
    output = CrawlOutput.of(append_to, overwrite, output_what)
    console = terminal_console()
    configure_logging(-1 if quiet else verbose, console)
    processes = options["processes"]
    sitemaps = sitemap_urls(options.pop("sitemap"))
    try:
        spider_cls = load_spider(options["spider"])
        settings = build_settings(options, spider_cls)
        if output is not None:
            output.declare(declared_item_type(settings, spider_cls))
        if engine == "celery":
            runner = _celery_runner(
                settings, seeds, spider_cls, processes, retry_dead, broker, sitemaps
            )
        else:
            runner = _native_runner(
                settings, seeds, spider_cls, processes, retry_dead, verbose, sitemaps
            )
    except InvalidURL as exc:
        raise click.BadParameter(str(exc), param_hint="SEED_URL") from None
    except ConfigError as exc:
        raise option_error(exc, options) from None
    if settings.log_format == "json":  # JSON lines, terminal or not: no live display
        console = None
        configure_logging(-1 if quiet else verbose, None, "json")
    metrics: contextlib.AbstractContextManager[None]
    if isinstance(runner, MultiProcessCrawl):
        metrics = supervisor_metrics(settings, runner.pool.env)
    elif engine == "celery":  # the work, and so the metrics, are the Celery workers'
        metrics = contextlib.nullcontext()
    else:
        metrics = worker_metrics(settings)
    try:
        with metrics:
            report = run_or_exit(
                runner,
                None if quiet else console,
                failure="cannot crawl",
                log_interval_s=None if quiet else settings.log_interval_s,
            )
    except ConfigError as exc:  # the metrics port cannot be bound
        raise click.UsageError(str(exc)) from None
    print_summary(report, sys.stdout)
    final: Settings = getattr(runner, "settings", settings)  # a shared job's, once bound
    if output is not None:
        rows = output.write(final.store)
        click.echo(f"wrote {rows} {output.what} to {output.path}", err=True)
    _exit_for(report, final, fail_on_spider_errors=fail_on_spider_errors)


def _exit_for(report: CrawlReport, final: Settings, *, fail_on_spider_errors: bool) -> None:
    """Exit with the crawl's status (`crawl`'s docstring), or return for 0."""
    if report.stopped_by == "stopped":
        sys.exit(1)
    failed = nothing_stored_line(report)
    if failed is not None:
        click.echo(failed, err=True)
        sys.exit(EXIT_NOTHING_STORED)
    warning = None
    if report.store.spider_errors:  # their bodies may be an earlier run's (--store-body)
        replayable = asyncio.run(_replayable_errors(final.store))
        warning = spider_errors_warning(report, replayable=replayable)
    if warning is not None:
        click.echo(warning, err=True)
        if fail_on_spider_errors:
            sys.exit(EXIT_SPIDER_ERRORS)


async def _replayable_errors(store_url: str) -> int:
    """How many of the store's pages with a spider error kept a body or a WARC record."""
    store = await open_store(store_url, read_only=True)
    try:
        pages = store.pages(with_body=True, spider_errors_only=True)
        return sum([p.body is not None or p.warc_file is not None async for p in pages])
    finally:
        await store.close()


def _celery_runner(
    settings: Settings,
    seeds: tuple[str, ...],
    spider_cls: type[Spider],
    processes: int | None,
    retry_dead: bool,
    broker: str | None,
    sitemaps: tuple[str, ...],
) -> Runner:
    """The Celery engine's crawl (imported only when asked for: it needs the celery extra)."""
    if retry_dead:
        raise ConfigError("retry_dead", "--retry-dead is not supported by the Celery engine")
    try:
        from crawlq.celery.crawl import CeleryCrawl, celery_settings
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            "engine", f"the Celery engine needs celery: pip install 'crawlq[celery]' ({exc})"
        ) from exc
    if broker is not None:
        settings = dataclasses.replace(
            settings, broker_url=broker, explicit=settings.explicit | {"broker_url"}
        )
    plan = plan_crawl(celery_settings(settings), seeds, spider_cls, sitemaps=sitemaps)
    return CeleryCrawl(plan.settings, plan.start_requests, processes=processes)


def _native_runner(
    settings: Settings,
    seeds: tuple[str, ...],
    spider_cls: type[Spider],
    processes: int | None,
    retry_dead: bool,
    verbose: int,
    sitemaps: tuple[str, ...],
) -> Runner:
    if processes is not None and processes < 1:
        raise ConfigError("processes", f"must be at least 1, got {processes}")
    if settings.frontier is None and settings.job is not None:
        raise ConfigError("job", "a job name needs a shared --frontier (redis://…)")
    if settings.frontier is None:
        return _embedded_runner(
            settings, seeds, spider_cls, processes, retry_dead, verbose, sitemaps
        )
    if settings.frontier is not None and processes is None:
        processes = os.cpu_count() or 1
    if processes is not None and processes > 1:
        plan = plan_crawl(settings, seeds, spider_cls, sitemaps=sitemaps)
        args = ["--concurrency", str(settings.concurrency), *_child_logging(settings, verbose)]
        args += ["--warc-keep-auth"] if settings.warc_keep_auth else []
        return MultiProcessCrawl(
            plan.settings, plan.start_requests, processes, args, retry_dead=retry_dead
        )
    return Crawl(settings, seeds, spider_cls, retry_dead=retry_dead, sitemaps=sitemaps)


def _child_logging(settings: Settings, verbose: int) -> list[str]:
    """The logging options of the worker processes a crawl starts: errors only, unless -v."""
    return ["-" + "v" * verbose if verbose else "-q", "--log-format", settings.log_format]


def _embedded_runner(
    settings: Settings,
    seeds: tuple[str, ...],
    spider_cls: type[Spider],
    processes: int | None,
    retry_dead: bool,
    verbose: int,
    sitemaps: tuple[str, ...],
) -> Runner:
    """The embedded crawl: in this process alone, or on ``--processes P`` (`LocalProcessesCrawl`).

    One process by default: two processes have not yet been measured faster than one on a
    machine with a core to spare (bench/RESULTS.md, 2026-12-04), and a politeness-bound crawl
    pays a socket round trip per lease. ``--max-pages`` and ``--metrics-port``, whose numbers
    one process keeps exact, need one process (for now).
    """
    if processes is None:
        processes = 1
    elif processes > 1 and settings.max_pages is not None:
        raise ConfigError("processes", "--max-pages is kept by one process: give --processes 1")
    elif processes > 1 and settings.metrics_port is not None:
        raise ConfigError("processes", "--metrics-port needs --processes 1 without --frontier")
    if processes == 1:
        return Crawl(settings, seeds, spider_cls, retry_dead=retry_dead, sitemaps=sitemaps)
    args = _child_logging(settings, verbose)
    return LocalProcessesCrawl(
        settings,
        seeds,
        spider_cls,
        processes=processes,
        child_args=args,
        retry_dead=retry_dead,
        sitemaps=sitemaps,
    )
