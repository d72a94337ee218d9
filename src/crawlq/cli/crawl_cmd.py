"""``crawlq crawl``: crawl from seed URLs on this machine (embedded SQLite by default)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import Any

import click
from rich.console import Console

from crawlq.cli.output import ProgressDisplay, configure_logging, print_summary, stderr_console
from crawlq.engine import Crawl, CrawlReport
from crawlq.errors import ConfigError, CrawlqError, InvalidURL
from crawlq.settings import Settings
from crawlq.spider import load_spider

__all__ = ["crawl"]

_REFRESH_S = 0.5


@click.command()
@click.argument("seeds", nargs=-1, metavar="SEED_URL...")
@click.option("--store", default=None, help="SQLite file for frontier and results [crawlq.db].")
@click.option("--max-pages", type=int, default=None, help="Stop after N pages in the store.")
@click.option("--max-depth", type=int, default=None, help="Follow links at most N deep.")
@click.option("--concurrency", type=int, default=None, help="Requests in flight [16].")
@click.option("--host-concurrency", type=int, default=None, help="Requests in flight per host [1].")
@click.option("--delay", type=float, default=None, help="Seconds between requests to a host [1.0].")
@click.option("--timeout", type=float, default=None, help="Seconds allowed per fetch [30].")
@click.option("--max-retries", type=int, default=None, help="Retries of transient failures [3].")
@click.option("--retry-delay", type=float, default=None, help="Backoff base in seconds [1.0].")
@click.option("--user-agent", default=None, help="User-Agent header [crawlq/0.1].")
@click.option("--ignore-robots", is_flag=True, default=False, help="Do not obey robots.txt.")
@click.option("--allow-domain", multiple=True, help="Follow links to this domain (repeatable).")
@click.option("--include", multiple=True, help="Only follow URLs matching REGEX (repeatable).")
@click.option("--exclude", multiple=True, help="Do not follow URLs matching REGEX (repeatable).")
@click.option("--spider", default=None, help="Spider as module:Class or path/file.py:Class.")
@click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML settings.")
@click.option("-q", "--quiet", is_flag=True, help="No progress display, errors only.")
@click.option("-v", "--verbose", count=True, help="-v: a line per URL; -vv: debug.")
def crawl(
    seeds: tuple[str, ...],
    quiet: bool,
    verbose: int,
    config: str | None,
    **options: Any,
) -> None:
    """Crawl SEED_URL... and store every page once.

    Re-running the same command resumes an interrupted crawl. Exit status: 0 when the crawl
    finished (or stopped at --max-pages), 1 when it could not start or was interrupted,
    2 for bad options or seed URLs.
    """
    console = stderr_console()
    configure_logging(-1 if quiet else verbose, console)
    try:
        spider_cls = load_spider(options["spider"])
        settings = Settings.build(
            file=config, spider_settings=spider_cls.custom_settings, cli=_settings_args(options)
        )
        runner = Crawl(settings, seeds, spider_cls)
    except InvalidURL as exc:
        raise click.BadParameter(str(exc), param_hint="SEED_URL") from None
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        report = asyncio.run(_run(runner, console if not quiet and console.is_terminal else None))
    except CrawlqError as exc:
        click.echo(f"crawlq: cannot crawl: {exc}", err=True)
        sys.exit(1)
    print_summary(report, sys.stdout)
    if report.stopped_by == "stopped":
        sys.exit(1)


def _settings_args(options: dict[str, Any]) -> dict[str, Any]:
    renamed = {"delay": "delay_s", "timeout": "timeout_s", "retry_delay": "retry_delay_s"}
    out = {renamed.get(k, k): v for k, v in options.items() if k not in ("ignore_robots",)}
    out["allowed_domains"] = out.pop("allow_domain") or None
    out["include"] = out["include"] or None
    out["exclude"] = out["exclude"] or None
    if options["ignore_robots"]:
        out["obey_robots"] = False
    return out


async def _run(runner: Crawl, console: Console | None) -> CrawlReport:
    loop = asyncio.get_running_loop()
    interrupts = 0

    def on_signal() -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            click.echo(
                "\nstopping: finishing in-flight requests (Ctrl-C again to abandon them)",
                err=True,
            )
        runner.stop(force=interrupts > 1)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        if console is None:
            return await runner.run()
        with ProgressDisplay(console) as display:
            task = asyncio.create_task(runner.run())
            snapshot = None
            while not task.done():
                await asyncio.wait([task], timeout=_REFRESH_S)
                with contextlib.suppress(CrawlqError):  # the run may be closing its frontier
                    snapshot = await runner.progress()
                if snapshot is not None:
                    display.update(snapshot)
            return task.result()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
