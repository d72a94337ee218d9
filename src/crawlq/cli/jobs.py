"""``crawlq jobs`` and ``crawlq job pause|resume|delete|expire|settings``: shared jobs' lifecycle.

The rules live in `crawlq.frontier.redis.jobs`; these commands parse, call and print. Jobs
are those of a Redis frontier (either engine): an embedded crawl's SQLite file is one job,
owned by one process, and is removed by deleting the file.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from crawlq.cli.options import wide_option
from crawlq.cli.terminal import stdout_console
from crawlq.errors import ConfigError, CrawlqError
from crawlq.secrecy import redact, without_password
from crawlq.settings import check_job_name

__all__ = ["job", "jobs"]

_T = TypeVar("_T")

_frontier = click.option(
    "--frontier",
    required=True,
    envvar="CRAWLQ_FRONTIER",
    help="redis://host:port/db (or rediss://, unix://) of the jobs (or $CRAWLQ_FRONTIER).",
)


def _run(frontier: str, step: Callable[[Any], Awaitable[_T]]) -> _T:
    """Open a `JobAdmin` on ``frontier``, run ``step`` with it, close it; errors exit 1."""
    from crawlq.frontier.redis.jobs import JobAdmin, JobBusy, NoSuchJob

    async def go() -> _T:
        admin = JobAdmin.open(frontier)
        try:
            return await step(admin)
        finally:
            await admin.close()

    try:
        return asyncio.run(go())
    except ConfigError as exc:
        raise click.BadParameter(
            f"{redact(frontier)!r}: {str(exc).removeprefix('frontier: ')}",
            param_hint="--frontier",
        ) from None
    except (NoSuchJob, JobBusy) as exc:
        click.echo(f"crawlq: {exc}", err=True)
        sys.exit(1)
    except CrawlqError as exc:
        click.echo(f"crawlq: {exc}", err=True)
        sys.exit(1)


def _job_name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    try:
        return check_job_name(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc).removeprefix("job: ")) from None


@click.command()
@_frontier
@click.option("--json", "as_json", is_flag=True, help="A JSON array, for scripts.")
@wide_option
def jobs(frontier: str, as_json: bool, wide: bool) -> None:
    """List the jobs of a Redis frontier: engine, created, queued/done/dead, last activity."""
    found = _run(frontier, lambda admin: admin.jobs())
    if as_json:
        click.echo(json.dumps([info.to_json() for info in found], indent=2))
        return
    from rich.table import Column, Table

    table = Table("engine", "created", "state", "queued", "done", "dead", "workers", "last")
    table.columns.insert(0, Column("job", no_wrap=True))
    for info in found:
        state = "paused" if info.paused else ("finished" if info.finished else "running")
        if info.ttl_s is not None:
            state += f" (expires in {info.ttl_s:.0f}s)"
        waiting = info.pending if info.engine == "celery" else info.queued
        table.add_row(
            info.name,
            info.engine,
            _when(info.created_at),
            state,
            str(waiting if waiting is not None else "-"),
            str(info.done),
            str(info.dead),
            str(info.live_workers),
            _when(info.last_activity),
        )
    console = stdout_console(wide=wide)
    if not found:
        console.print("no jobs on this Redis")
    else:
        console.print(table)


@click.group()
def job() -> None:
    """Pause, resume, delete, expire one shared job or show its settings (see `crawlq jobs`)."""


@job.command()
@click.argument("name", callback=_job_name)
@_frontier
def pause(name: str, frontier: str) -> None:
    """Stop leasing NAME cluster-wide; workers stay up and wait (producers may still push)."""
    _run(frontier, lambda admin: admin.pause(name))
    click.echo(f"job {name!r} paused: workers lease nothing until `crawlq job resume {name}`")


@job.command()
@click.argument("name", callback=_job_name)
@_frontier
def resume(name: str, frontier: str) -> None:
    """Let NAME's workers lease again."""
    _run(frontier, lambda admin: admin.resume(name))
    click.echo(f"job {name!r} resumed")


@job.command()
@click.argument("name", callback=_job_name)
@_frontier
@click.option("--force", is_flag=True, help="Delete even while workers are live.")
def delete(name: str, frontier: str, force: bool) -> None:
    """Remove every Redis key of NAME (its queues, seen set, dead letters); not its store."""
    deleted = _run(frontier, lambda admin: admin.delete(name, force=force))
    click.echo(f"job {name!r} deleted: {deleted} keys")


@job.command()
@click.argument("name", callback=_job_name)
@_frontier
@click.option(
    "--ttl",
    "ttl_s",
    type=click.FloatRange(min=1),
    required=True,
    help="Seconds until every key of the job is removed by Redis.",
)
@click.option("--force", is_flag=True, help="Expire a job that still has work.")
def expire(name: str, frontier: str, ttl_s: float, force: bool) -> None:
    """Let Redis remove a finished job's keys after --ttl seconds."""
    count = _run(frontier, lambda admin: admin.expire(name, ttl_s, force=force))
    click.echo(f"job {name!r}: {count} keys expire in {ttl_s:g}s")


@job.command()
@click.argument("name", callback=_job_name)
@_frontier
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for scripts.")
def settings(name: str, frontier: str, as_json: bool) -> None:
    """Show the settings NAME stored when it was created, which its workers adopt.

    They are frozen: the first producer or task of a job stores them (for a job nobody
    seeded, such as `celery` of scrape.delay(url), the first worker's CRAWLQ_* settings),
    and a worker given another value refuses the job. To change them, stop the job's
    workers and `crawlq job delete NAME`: the next crawl, seed or task stores new ones.
    """
    found = _run(frontier, lambda admin: admin.settings(name))
    if found is not None and isinstance(found.get("store"), str):  # an older crawlq kept it
        found["store"] = without_password(found["store"])
    if as_json:
        click.echo(json.dumps({"job": name, "settings": found}, indent=2, sort_keys=True))
        return
    if found is None:
        click.echo(f"job {name!r} has no stored settings yet (its first crawl or task stores them)")
        return
    from rich.table import Table
    from rich.text import Text

    table = Table("setting", "value", title=f"job {name}: settings its workers adopt")
    for key in sorted(found):
        table.add_row(Text(str(key)), Text(json.dumps(found[key])))
    console = stdout_console()
    console.print(table)
    console.print(
        Text(
            f"frozen when the job was created; to change them stop its workers and run "
            f"`crawlq job delete {name}`: the next crawl, seed or task stores new ones"
        )
    )


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
