"""``crawlq dead list`` and ``crawlq dead replay``: dead letters an operator can act on.

Both take the same options (`dead_options`): the filters (``--reason``, ``--host``,
``--since``, read as for ``crawlq export``), the crawl's location (``--frontier``, ``--job``,
``--store``, as ``inspect``) and ``--json``; `dead_filter` turns the filters into a
`crawlq.frontier.inspection.DeadFilter` (``since_ms``: Unix milliseconds), or a
``click.BadParameter`` naming the option. A replay goes through the frontier
(`crawlq.ops.dead`; for the Celery engine `crawlq.celery.operate`, which sends the tasks on
``--broker``). Exit status: 0 done, 1 a backend cannot be read or written (an embedded crawl
still running on the file included), 2 bad input.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from crawlq.cli.jobview import BadInput, JobView, open_view
from crawlq.cli.options import since_option, since_s, wide_option
from crawlq.cli.reports import dead_table
from crawlq.cli.terminal import stdout_console
from crawlq.errors import CrawlqError
from crawlq.frontier.inspection import DeadFilter
from crawlq.ops.dead import (
    DeadRow,
    ReplayReport,
    job_bounds,
    job_scope,
    native_dead_rows,
    replay_native,
)

__all__ = ["dead", "dead_filter", "dead_options"]

F = TypeVar("F", bound=Callable[..., Any])


def dead_options(f: F) -> F:
    """Add the shared options of the ``dead`` commands to the command ``f``."""
    for decorator in reversed(
        [
            click.option(
                "--reason", default=None, help="Only this dead-letter reason (http_503…)."
            ),
            click.option(
                "--host",
                default=None,
                help="Only this host (example.com, or host:port; without a port: any port).",
            ),
            since_option("dead-lettered"),
            click.option(
                "--frontier",
                default=None,
                help="redis://… (or rediss://, unix://) of a shared job, or a SQLite frontier file "
                "(default: embedded in --store).",
            ),
            click.option("--job", default=None, help="The job name (with a Redis frontier)."),
            click.option(
                "--store",
                default=None,
                help="A SQLite file [crawlq.db] or postgresql://… (default for a job: its own).",
            ),
            click.option("--json", "as_json", is_flag=True, help="JSON, for scripts."),
        ]
    ):
        f = decorator(f)
    return f


def dead_filter(reason: str | None, host: str | None, since: str | None) -> DeadFilter:
    """The dead letters the options select.

    Raises:
        click.BadParameter: ``--host`` is not a host name or ``--since`` not a time or age.
    """
    if host is not None:
        host = host.strip().lower()
        if "//" in host:  # a URL: its host
            from crawlq.urls import host_key

            try:
                host = host_key(host)
            except CrawlqError as exc:
                raise click.BadParameter(str(exc), param_hint="--host") from None
        if not host or "/" in host or " " in host:
            raise click.BadParameter(f"{host!r}: not a host name", param_hint="--host")
    since_at = since_s(since)
    since_ms = None if since_at is None else round(since_at * 1000)
    return DeadFilter(reason=reason or None, host=host, since_ms=since_ms)


@click.group()
def dead() -> None:
    """List dead letters, or replay them through the frontier."""


@dead.command("list")
@dead_options
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N.")
@wide_option
def list_(
    reason: str | None,
    host: str | None,
    since: str | None,
    frontier: str | None,
    job: str | None,
    store: str | None,
    as_json: bool,
    limit: int | None,
    wide: bool,
) -> None:
    """List dead letters: URL, reason, attempts, when, the page that linked to it, detail.

    --json writes one JSON object per line (JSON Lines).
    """
    where = dead_filter(reason, host, since)

    async def run() -> list[DeadRow]:
        rows: list[DeadRow] = []
        shown = 0
        async with open_view(frontier, job, store) as view:
            async for row in _rows(view, where):
                if as_json:
                    click.echo(json.dumps(row.to_json()))
                else:
                    rows.append(row)
                shown += 1
                if limit is not None and shown >= limit:
                    break
        return rows

    rows = _run(run, "list dead letters")
    if not as_json:
        stdout_console(wide=wide).print(dead_table([r.to_json() for r in rows]))


def _rows(view: JobView, where: DeadFilter) -> Any:
    if view.celery is not None:
        if view.store is None:
            raise CrawlqError(
                f"the dead letters of a Celery job are in its store: {view.store_problem}"
            )
        from crawlq.celery.operate import celery_dead_rows

        return celery_dead_rows(view.celery, view.store, where)
    return native_dead_rows(view.frontier, view.store, where)


@dead.command()
@dead_options
@click.option("--dry-run", is_flag=True, help="Say what would be replayed; change nothing.")
@click.option(
    "--max-push-wait",
    "max_push_wait_s",
    type=click.FloatRange(min=0),
    default=None,
    metavar="S",
    help="A job bounded with --when-full block: wait at most S seconds for room.",
)
@click.option(
    "--broker",
    default=None,
    help="Celery engine: the broker to send the tasks to (CRAWLQ_BROKER_URL).",
)
def replay(
    reason: str | None,
    host: str | None,
    since: str | None,
    frontier: str | None,
    job: str | None,
    store: str | None,
    as_json: bool,
    dry_run: bool,
    max_push_wait_s: float | None,
    broker: str | None,
) -> None:
    """Put dead letters back in the queue, attempts counted afresh.

    Each goes back to its host's queue under its fingerprint: it is fetched once more, under
    its host's politeness, if the job's scope still takes it. Workers (or the next `crawlq
    crawl` of an embedded store) fetch them. A job's queue bounds hold as for `crawlq seed`:
    with --when-full block the replay waits for room (at most --max-push-wait S; exit 1 when
    it runs out), with drop-lowest the lowest priorities become frontier_full dead letters.
    """
    where = dead_filter(reason, host, since)

    async def run() -> tuple[ReplayReport, JobView | None]:
        async with open_view(frontier, job, store, write=not dry_run) as view:
            source = f"{view.name}'s settings"
            scope = job_scope(view.settings, source)
            if view.celery is None:
                bounds = job_bounds(view.settings, source)
                report = await replay_native(
                    view.frontier,
                    where,
                    scope,
                    dry_run=dry_run,
                    bounds=bounds,
                    max_wait_s=max_push_wait_s,
                )
                return report, view
            return await _replay_celery(view, where, scope, dry_run, broker), view

    report, view = _run(run, "replay dead letters")
    if as_json:
        click.echo(json.dumps(_report_json(report)))
    else:
        click.echo(_report_text(report, view))
    if report.timeout is not None:
        sys.exit(1)


async def _replay_celery(
    view: JobView, where: DeadFilter, scope: Any, dry_run: bool, broker: str | None
) -> ReplayReport:
    from crawlq.celery.operate import replay_celery, task_sender
    from crawlq.settings import Settings

    assert view.celery is not None
    if view.store is None:
        raise CrawlqError(
            f"the dead letters of a Celery job are in its store: {view.store_problem}"
        )
    if dry_run:
        return await replay_celery(view.celery, view.store, where, scope, None)
    cli: dict[str, Any] = {"job": view.celery.job, "frontier": None}
    if broker is not None:
        cli["broker_url"] = broker
    settings = Settings.build(cli=cli)
    if not settings.broker_url:
        raise BadInput("--broker", "a Celery job's replay sends tasks: give --broker URL")
    send, close = task_sender(settings)
    try:
        return await replay_celery(view.celery, view.store, where, scope, send)
    finally:
        close()


def _report_json(report: ReplayReport) -> dict[str, Any]:
    return {
        "replayed": report.replayed,
        "by_reason": dict(report.by_reason),
        "out_of_scope": report.out_of_scope,
        "dry_run": report.dry_run,
        "waited_for_room": report.waited,
        "dropped_frontier_full": report.dropped,
        "left_full": report.left_full,
    }


def _report_text(report: ReplayReport, view: JobView | None) -> str:
    reasons = ", ".join(f"{r} {n}" for r, n in report.by_reason.most_common())
    counted = f"{report.replayed} dead letter{'' if report.replayed == 1 else 's'}"
    if reasons:
        counted += f" ({reasons})"
    if report.dry_run:
        line = f"would replay {counted}; nothing changed (--dry-run)"
    else:
        line = f"replayed {counted}"
    if report.out_of_scope:
        line += f"; {report.out_of_scope} left dead: out of the job's scope now"
    b = report.bounds
    bound = f"max_queued {b.max_queued}, per host {b.max_queued_per_host}"
    if report.waited and report.timeout is None:
        line += f"; waited for the workers to make room in the job's queue ({bound})"
    if report.dropped:
        line += (
            f"; {report.dropped} dead-lettered as frontier_full: the job's queue is full"
            f" ({bound}, --when-full drop-lowest)"
        )
    if report.timeout is not None:
        line += (
            f"; {report.left_full} left dead: {report.timeout}; re-run the same command once"
            " the workers have made room"
        )
    if report.replayed and not report.dry_run and view is not None:
        who = (
            "the next `crawlq crawl` on this store fetches them"
            if view.settings is None and view.celery is None
            else "the job's workers fetch them"
        )
        line += f"\n{who}"
    return line


def _run(make: Callable[[], Any], what: str) -> Any:
    try:
        return asyncio.run(make())
    except BadInput as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from None
    except CrawlqError as exc:
        click.echo(f"crawlq: cannot {what}: {exc}", err=True)
        sys.exit(1)
