"""``crawlq dashboard``: a live web page of a frontier's jobs (`crawlq.dashboard`)."""

from __future__ import annotations

import asyncio
import sys

import click

from crawlq.cli.options import checked_job, shared_frontier
from crawlq.cli.terminal import configure_logging
from crawlq.errors import ConfigError, CrawlqError

__all__ = ["dashboard"]


@click.command()
@click.option(
    "--frontier",
    required=True,
    help="redis://[:password@]host:port/db (or rediss://, unix://) of the jobs.",
)
@click.option(
    "--job", "jobs", multiple=True, help="A job to show (repeatable; default: every job found)."
)
@click.option(
    "--store",
    default=None,
    help="The store to read (default: each job's own; CRAWLQ_STORE gives its password).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--token",
    default=None,
    envvar="CRAWLQ_DASHBOARD_TOKEN",
    help="Every request must carry it (Authorization: Bearer, ?token=, or the cookie that "
    "sets); required to bind an address other than loopback (CRAWLQ_DASHBOARD_TOKEN).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=2.0,
    show_default=True,
    help="Seconds between two samples of each job (and page refreshes).",
)
def dashboard(
    frontier: str,
    jobs: tuple[str, ...],
    store: str | None,
    host: str,
    port: int,
    token: str | None,
    interval: float,
) -> None:
    """Serve a live web page of the jobs on --frontier.

    Per job (each panel the job's own, also in a store jobs share): queue length over time,
    pages/s, error and retry rates, dead letters by reason, the busiest and slowest hosts,
    hosts in backoff, live workers, whether it is paused; and a search box that tells a URL's
    story in the job, as `crawlq inspect` does.

    Bound to 127.0.0.1 unless --host says otherwise, which then needs --token.
    """
    configure_logging(0, None)
    for job in jobs:
        checked_job(job)
    shared_frontier(frontier)
    from crawlq.dashboard import Dashboard, serve

    board = Dashboard(frontier, list(jobs), store, interval, fixed=bool(jobs))

    def announce(url: str) -> None:
        click.echo(f"crawlq dashboard on {url}", err=True)

    try:
        asyncio.run(serve(board, host, port, token, announce))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except CrawlqError as exc:
        click.echo(f"crawlq: dashboard stopped: {exc}", err=True)
        sys.exit(1)
