"""``crawlq worker``: the consumer side of a shared job; run it on as many machines as you like."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import click

from crawlq.cli.option_settings import build_settings
from crawlq.cli.options import (
    frontier_options,
    job_options,
    observe_options,
    output_options,
    process_options,
)
from crawlq.cli.reports import print_summary
from crawlq.cli.running import run_or_exit, supervisor_metrics, worker_metrics
from crawlq.cli.terminal import configure_logging, terminal_console
from crawlq.engine.multiprocess import MultiProcessWorker
from crawlq.engine.service import WorkerService
from crawlq.errors import ConfigError

__all__ = ["worker"]


@click.command()
@job_options
@frontier_options(required=True)
@process_options
@click.option(
    "--exit-when-done",
    is_flag=True,
    help="Exit when nothing is queued, delayed or in flight anywhere (else wait for work).",
)
@click.option(
    "--max-pages-share",
    type=int,
    default=None,
    hidden=True,  # set by `crawl --processes P --max-pages N` for its children: their share
    help="Store at most N pages in this process.",
)
@click.option(
    "--parent-pid",
    type=int,
    default=None,
    hidden=True,  # set by `crawl`/`worker --processes P` for their children: stop when it dies
    help="Stop gracefully once process PID is no longer this process's parent.",
)
@click.option(
    "--counters-file",
    default=None,
    hidden=True,  # set by `crawl`/`worker --processes P` for their children: their counts
    help="Write what this worker did, as JSON, to PATH when it ends.",
)
@output_options
@observe_options
def worker(
    quiet: bool,
    verbose: int,
    exit_when_done: bool,
    max_pages_share: int | None,
    parent_pid: int | None,
    counters_file: str | None,
    **options: Any,
) -> None:
    """Work on a job: lease URLs, fetch, parse, store, push discovered links, ack.

    The job's settings (politeness, retries, scope, spider, store) come from the job, stored
    when it was seeded; options given here must agree with them. Without --exit-when-done an
    idle worker waits for new work (no polling) until SIGINT/SIGTERM, which finish in-flight
    requests first. --processes P starts P such workers on this machine, shown with one
    progress display and one summary.
    """
    child = parent_pid is not None  # started by `crawl` or `worker --processes`: it reports
    console = None if child else terminal_console()
    configure_logging(-1 if quiet else verbose, console)
    processes = 1 if options["processes"] is None else options["processes"]
    if processes < 1:
        raise click.UsageError(f"processes: must be at least 1, got {processes}")
    settings = build_settings(options)
    if settings.log_format == "json":  # JSON lines, terminal or not: no live display
        console = None
        configure_logging(-1 if quiet else verbose, None, "json")
    if processes > 1:
        env = {"CRAWLQ_FRONTIER": settings.frontier or ""}
        if "store" in settings.explicit:
            env["CRAWLQ_STORE"] = settings.store
        if settings.proxies:  # their URLs may hold a password
            env["CRAWLQ_PROXIES"] = ",".join(settings.proxies)
        args = _without_options(
            sys.argv[sys.argv.index("worker") + 1 :], (*_SUPERVISOR_ONLY, *_PASSED_IN_ENV)
        )
        try:
            with supervisor_metrics(settings, env):
                runner = MultiProcessWorker(
                    settings, processes, args, env, exit_when_done=exit_when_done
                )
                report = run_or_exit(
                    runner,
                    None if quiet else console,
                    failure="worker stopped",
                    log_interval_s=None if quiet else settings.log_interval_s,
                )
        except ConfigError as exc:  # the metrics port cannot be bound
            raise click.UsageError(str(exc)) from None
        if not quiet:
            print_summary(report, sys.stdout, worker=True)
        return
    service = WorkerService(
        settings, exit_when_done=exit_when_done, max_pages=max_pages_share, parent_pid=parent_pid
    )
    try:
        with worker_metrics(settings):
            report = run_or_exit(
                service,
                None if quiet or child else console,
                failure="worker stopped",
                log_interval_s=None if quiet or child else settings.log_interval_s,
                child=child,
            )
    except ConfigError as exc:  # the metrics port cannot be bound
        raise click.UsageError(str(exc)) from None
    if counters_file is not None:  # for the parent's summary (crawlq.engine.multiprocess)
        with contextlib.suppress(OSError):  # the parent is gone, or gave up waiting
            Path(counters_file).write_text(json.dumps(report.counters.as_json()), "utf-8")
    if not quiet and not child:
        print_summary(report, sys.stdout, worker=True)


_PASSED_IN_ENV = ("--frontier", "--store", "--proxy")
"""Options whose value may hold a password: children get them in their environment, not on
their command lines (which every local user can read)."""
_SUPERVISOR_ONLY = ("--processes", "--metrics-port", "--metrics-host", "--counters-file")
"""Options the supervisor keeps: its children serve no metrics of their own."""


def _without_options(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """``argv`` without the options ``names`` and their values (``--x V`` or ``--x=V``)."""
    args: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        elif not arg.startswith(tuple(f"{name}=" for name in names)):
            args.append(arg)
    return args
