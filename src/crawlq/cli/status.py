"""``crawlq status``: what a job's frontier holds now — the queue length operators watch.

A job run by the Celery engine (``crawlq crawl --engine celery``, ``scrape.delay``) has no
native queues: its URLs wait in the broker, and Redis holds what is admitted and not settled
yet (the ``pending`` hash, see `crawlq.celery.runtime.state`). For such a job the report says
``"engine": "celery"`` and gives ``pending``; ``queued``, ``in_flight``, ``pages_per_s`` and
``workers`` are null (not known to Redis: ask ``celery inspect``); seen, done, dead, delayed
(retries) and stored pages are the same counters as for a native job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import click

from crawlq.cli.options import checked_job, shared_frontier, wide_option
from crawlq.cli.reports import status_table
from crawlq.cli.terminal import stdout_console
from crawlq.errors import CrawlqError
from crawlq.ops.report import job_report

if TYPE_CHECKING:
    from crawlq.engine.metrics import FrontierCollector

__all__ = ["status"]


@click.command()
@click.option(
    "--frontier", required=True, help="redis://host:port/db (or rediss://, unix://) of the job."
)
@click.option("--job", required=True, help="The job name.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for scripts.")
@wide_option
@click.option("--watch", is_flag=True, help="Refresh every --interval seconds until Ctrl-C.")
@click.option("--interval", type=click.FloatRange(min=0.2), default=2.0, show_default=True)
@click.option(
    "--prometheus-port",
    type=click.IntRange(0, 65535),
    default=None,
    metavar="PORT",
    help="Serve the job's frontier gauges to Prometheus on PORT (/metrics), refreshed every "
    "--interval seconds, until Ctrl-C. One exporter per job.",
)
@click.option(
    "--prometheus-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the --prometheus-port endpoint binds (0.0.0.0: every interface).",
)
def status(
    frontier: str,
    job: str,
    as_json: bool,
    wide: bool,
    watch: bool,
    interval: float,
    prometheus_port: int | None,
    prometheus_host: str,
) -> None:
    """Show a job's queue, the numbers operators watch for backpressure.

    Queued, in flight, delayed retries, dead, seen, done, stored pages, pages/s over the last
    minute, live workers (heartbeats) and the busiest hosts. For a job of the Celery engine:
    pending (queued in the broker or running), delayed retries, dead, seen, done and stored
    pages ("engine": "celery" in --json, where queued, in_flight and workers are null).
    Both: links not queued because their host had --max-pages-per-host URLs (over_budget).

    Stored pages are the pages this job wrote to its store; when other jobs write to the same
    store, its total follows ("12 (of 40 in the store)"; stored_total in --json). A job keeps
    its store URL without the password, which CRAWLQ_STORE (the same URL with it) supplies.
    --watch runs until Ctrl-C, which ends it with exit status 0.
    """
    checked_job(job)
    shared_frontier(frontier)
    try:
        if prometheus_port is not None:
            with contextlib.suppress(KeyboardInterrupt):  # runs until Ctrl-C too: exit 0
                asyncio.run(_export(frontier, job, interval, prometheus_port, prometheus_host))
            return
        if watch and not as_json:
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how --watch ends: exit 0
                asyncio.run(_watch(frontier, job, interval, wide))
            return
        report = asyncio.run(job_report(frontier, job))
    except CrawlqError as exc:
        click.echo(f"crawlq: cannot read job {job!r}: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        stdout_console(wide=wide).print(status_table(report))


async def _export(url: str, job: str, interval: float, port: int, host: str) -> None:
    """Serve the job's frontier gauges (`crawlq.engine.metrics.FrontierCollector`) until Ctrl-C.

    The report is read every ``interval`` seconds; a failed read keeps serving the last one
    with ``crawlq_status_up`` 0 and says why on stderr.
    """
    from prometheus_client import CollectorRegistry

    from crawlq.engine.metrics import FrontierCollector, serve

    await job_report(url, job)  # a job that does not exist is an error at once
    collector = FrontierCollector(job)
    registry = CollectorRegistry()
    registry.register(collector)
    server = serve(port, host, registry)
    where = f"http://{host}:{server.port}/metrics"
    click.echo(f"serving job {job}'s frontier gauges on {where}", err=True)
    try:
        await _until_interrupted(lambda stop: _refresh(collector, url, job, interval, stop))
    finally:
        server.close()


async def _refresh(
    collector: FrontierCollector, url: str, job: str, interval: float, stop: asyncio.Event
) -> None:
    """Read the job's report into ``collector`` every ``interval`` seconds until ``stop``."""
    log = logging.getLogger(__name__)
    while not stop.is_set():
        try:
            collector.update(await job_report(url, job))
        except CrawlqError as exc:
            collector.update(None)
            log.warning("cannot read job %r: %s", job, exc)
        if not stop.is_set():
            await asyncio.sleep(interval)


async def _watch(url: str, job: str, interval: float, wide: bool) -> None:
    await _until_interrupted(lambda stop: _watch_tables(url, job, interval, wide, stop))


async def _watch_tables(
    url: str, job: str, interval: float, wide: bool, stop: asyncio.Event
) -> None:
    from rich.live import Live

    console = stdout_console(wide=wide)
    if not console.is_terminal:  # a file or a pipe: one table per interval, not a live one
        while True:
            report = await job_report(url, job)
            if stop.is_set():
                return
            console.print(status_table(report))
            await asyncio.sleep(interval)
    with Live(console=console, auto_refresh=False) as live:
        while True:
            report = await job_report(url, job)
            if stop.is_set():
                return
            live.update(status_table(report), refresh=True)
            await asyncio.sleep(interval)


async def _until_interrupted(body: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``body(stop)`` until SIGINT (Ctrl-C), then return: how ``--watch`` ends, exit 0.

    SIGINT sets ``stop`` and cancels the task. The flag is what makes the end certain: on
    Python 3.11, ``asyncio.wait_for`` (which redis-py runs every command under) drops a
    cancellation that arrives as the command completes (CPython gh-86296), so under load a
    Ctrl-C that only cancelled could be lost and the watch went on; ``body`` checks ``stop``
    after each report instead.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    task = asyncio.current_task()

    def interrupted() -> None:
        stop.set()
        if task is not None:
            task.cancel()

    loop.add_signal_handler(signal.SIGINT, interrupted)
    try:
        await body(stop)
    except asyncio.CancelledError:
        if not stop.is_set():
            raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
