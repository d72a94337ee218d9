"""Run a crawl or worker in the foreground: metrics, signals, live progress, the final report.

`run_or_exit` runs a `Runner` (`run_in_foreground`): the first SIGINT/SIGTERM stops it
gracefully, the second forcefully; progress is a live table on a terminal, else a log line
every ``--log-interval`` seconds (`log_progress`); a settings error exits 2 (click's usage
error), any other crawlq error is one line on stderr and exit 1.

Metrics (``crawl``, ``worker``): a process that works records its worker metrics
(`crawlq.engine.metrics.start_recording`) and serves them on ``--metrics-port``
(`worker_metrics`); a ``--processes P`` supervisor serves its children's metrics summed
(`supervisor_metrics`, `crawlq.engine.metrics.MultiprocessExporter`), and each child, started
with ``PROMETHEUS_MULTIPROC_DIR`` in its environment, records into that directory and serves
nothing itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import click

from crawlq.cli.reports import ProgressDisplay
from crawlq.cli.terminal import PROGRESS_LOGGER
from crawlq.engine import CrawlReport, Progress
from crawlq.errors import ConfigError, CrawlqError
from crawlq.settings import Settings

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "Runner",
    "log_progress",
    "run_in_foreground",
    "run_or_exit",
    "supervisor_metrics",
    "worker_metrics",
]

_REFRESH_S = 0.5


class Runner(Protocol):
    """What `run_in_foreground` drives.

    `crawlq.engine.Crawl` or `crawlq.engine.service.WorkerService`.
    """

    async def run(self) -> CrawlReport:
        """Work until done or stopped."""
        ...

    async def progress(self) -> Progress | None:
        """A snapshot, or None before the work started."""
        ...

    def stop(self, *, force: bool = False) -> None:
        """Stop gracefully, or abandon in-flight work with ``force``."""
        ...


async def log_progress(runner: Runner, interval_s: float) -> None:
    """Log one progress line every ``interval_s`` seconds until cancelled (Scrapy's LogStats).

    The line gives pages stored by this run, pages/s over the interval, and the frontier's
    queued, in flight, delayed (retrying), the run's dead letters (errors) and its pages with
    a spider error (any kind).

    The line is an INFO record of the ``crawlq.progress`` logger with the numbers also as
    structured fields (``--log-format json``).
    """
    log = logging.getLogger(PROGRESS_LOGGER)
    last_pages, last_at = 0, time.monotonic()
    while True:
        await asyncio.sleep(interval_s)
        snapshot = None
        with contextlib.suppress(CrawlqError):  # the run may be closing its frontier
            snapshot = await runner.progress()
        if snapshot is None:
            continue
        now = time.monotonic()
        f, c = snapshot.frontier, snapshot.counters
        rate = (c.pages - last_pages) / (now - last_at) if now > last_at else 0.0
        last_pages, last_at = c.pages, now
        fields = {
            "pages": c.pages,
            "pages_per_s": round(rate, 2),
            "queued": f.queued,
            "in_flight": f.in_flight,
            "delayed": f.delayed,
            "errors": sum(c.dead.values()),
            "spider_errors": sum(c.spider_errors.values()),
        }
        log.info(
            "pages %d (%.1f/s), queued %d, in flight %d, retrying %d, errors %d, spider errors %d",
            *fields.values(),
            extra={"crawlq": fields},
        )


async def run_in_foreground(
    runner: Runner,
    console: Console | None,
    log_interval_s: float | None = None,
    *,
    child: bool = False,
) -> CrawlReport:
    """Run ``runner``; the first SIGINT/SIGTERM stops it gracefully, the second forcefully.

    The first stop prints one line saying what happens (above the live display). A
    ``child`` (a worker process that ``crawl`` or ``worker --processes`` started) prints
    nothing and ignores SIGINT: a terminal's Ctrl-C reaches the whole process group, and the
    parent, which says what happens once for all, forwards it as SIGTERM (so one Ctrl-C is
    one stop, not two). A parent stopping its children at ``--max-pages`` is no interrupt.

    Args:
        runner: The crawl or worker.
        console: Where to draw live progress, or None for none.
        log_interval_s: Without a console: seconds between two progress log lines
            (`log_progress`), or None for none.
        child: This process is a worker started by another crawlq process.
    """
    loop = asyncio.get_running_loop()
    interrupts = 0

    def on_signal(sig: signal.Signals) -> None:
        nonlocal interrupts
        interrupts += 1
        runner.stop(force=interrupts > 1)  # first: telling the user may fail (a closed pipe)
        if interrupts == 1 and not child:
            again = "Ctrl-C" if sig == signal.SIGINT else f"{sig.name}"
            text = f"stopping: finishing in-flight requests ({again} again to abandon them)"
            with contextlib.suppress(OSError):
                if console is not None:
                    console.print(text)  # above the live display, not under it
                else:  # a log line like the progress lines: JSON under --log-format json
                    logging.getLogger(PROGRESS_LOGGER).info(text)

    for sig in (signal.SIGINT, signal.SIGTERM):
        if child and sig == signal.SIGINT:
            loop.add_signal_handler(sig, lambda: None)
        else:
            loop.add_signal_handler(sig, on_signal, sig)
    try:
        if console is None:
            if log_interval_s is None:
                return await runner.run()
            lines = asyncio.create_task(log_progress(runner, log_interval_s))
            try:
                return await runner.run()
            finally:
                lines.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await lines
        with ProgressDisplay(console) as display:
            task = asyncio.create_task(runner.run())
            while not task.done():
                await asyncio.wait([task], timeout=_REFRESH_S)
                snapshot = None
                with contextlib.suppress(CrawlqError):  # the run may be closing its frontier
                    snapshot = await runner.progress()
                if snapshot is not None:
                    display.update(snapshot)
            return task.result()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)


def run_or_exit(
    runner: Runner,
    console: Console | None,
    *,
    failure: str,
    log_interval_s: float | None = None,
    child: bool = False,
) -> CrawlReport:
    """Run ``runner`` with `run_in_foreground` and map its errors to the CLI's exits.

    A settings error is a usage error (exit 2, click's message); any other crawlq error is
    one line ``crawlq: <failure>: <error>`` on stderr and exit 1. ``child``: as in
    `run_in_foreground`.
    """
    try:
        return asyncio.run(run_in_foreground(runner, console, log_interval_s, child=child))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except CrawlqError as exc:
        click.echo(f"crawlq: {failure}: {exc}", err=True)
        sys.exit(1)


@contextlib.contextmanager
def worker_metrics(settings: Settings) -> Iterator[None]:
    """Record this process's worker metrics, and serve them when a port is given.

    Raises:
        ConfigError: The port cannot be bound, or prometheus-client is missing.
    """
    from crawlq.engine.metrics import MULTIPROC_ENV

    if os.environ.get(MULTIPROC_ENV):  # a supervisor's child: it serves the sums
        from crawlq.engine.metrics import start_recording

        start_recording()
        yield
        return
    if settings.metrics_port is None:
        yield
        return
    from crawlq.engine.metrics import serve, start_recording

    start_recording()
    server = serve(settings.metrics_port, settings.metrics_host)
    try:
        yield
    finally:
        server.close()


@contextlib.contextmanager
def supervisor_metrics(settings: Settings, env: dict[str, str]) -> Iterator[None]:
    """Serve the summed metrics of the children started with ``env`` (updated here).

    Raises:
        ConfigError: The port cannot be bound, or prometheus-client is missing.
    """
    if settings.metrics_port is None:
        yield
        return
    from crawlq.engine.metrics import MultiprocessExporter

    exporter = MultiprocessExporter(settings.metrics_port, settings.metrics_host)
    env.update(exporter.child_env())
    try:
        yield
    finally:
        exporter.close()
