"""``crawlq status``: what a job's frontier holds now — the queue length operators watch.

A job run by the Celery engine (``crawlq crawl --engine celery``, ``scrape.delay``) has no
native queues: its URLs wait in the broker, and Redis holds what is admitted and not settled
yet (the ``pending`` hash, see `crawlq.celery.state`). For such a job the report says
``"engine": "celery"`` and gives ``pending``; ``queued``, ``in_flight``, ``pages_per_s`` and
``workers`` are null (not known to Redis: ask ``celery inspect``); seen, done, dead, delayed
(retries) and stored pages are the same counters as for a native job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from crawlq.cli.output import status_table, stdout_console
from crawlq.errors import ConfigError, CrawlqError
from crawlq.frontier import Frontier, open_frontier
from crawlq.secrecy import redact, without_password
from crawlq.settings import check_job_name
from crawlq.store import open_store

__all__ = ["status"]


@click.command()
@click.option("--frontier", required=True, help="redis://host:port/db of the job.")
@click.option("--job", required=True, help="The job name.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for scripts.")
@click.option("--watch", is_flag=True, help="Refresh every --interval seconds until Ctrl-C.")
@click.option("--interval", type=click.FloatRange(min=0.2), default=2.0, show_default=True)
def status(frontier: str, job: str, as_json: bool, watch: bool, interval: float) -> None:
    """Show a job's queue, the numbers operators watch for backpressure.

    Queued, in flight, delayed retries, dead, seen, done, stored pages, pages/s over the last
    minute, live workers (heartbeats) and the busiest hosts. For a job of the Celery engine:
    pending (queued in the broker or running), delayed retries, dead, seen, done and stored
    pages ("engine": "celery" in --json, where queued, in_flight and workers are null).

    Stored pages are counted in the job's store; a job keeps its store URL without the
    password, which CRAWLQ_STORE (the same URL with it) supplies. --watch runs until Ctrl-C,
    which ends it with exit status 0.
    """
    try:
        check_job_name(job)
    except ConfigError as exc:
        raise click.BadParameter(str(exc).removeprefix("job: "), param_hint="--job") from None
    if not frontier.startswith(("redis://", "rediss://", "unix://")):
        # a shared job only: never open (and so create) a SQLite file named by a typo
        raise click.BadParameter(
            f"{redact(frontier)!r}: expected redis://[:password@]host:port/DB",
            param_hint="--frontier",
        )
    try:
        if watch and not as_json:
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how --watch ends: exit 0
                asyncio.run(_watch(frontier, job, interval))
            return
        report = asyncio.run(_snapshot(frontier, job))
    except CrawlqError as exc:
        click.echo(f"crawlq: cannot read job {job!r}: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        stdout_console().print(status_table(report))


async def _snapshot(url: str, job: str) -> dict[str, Any]:
    frontier = await open_frontier(url, job=job)
    try:
        stats = await frontier.stats()
        settings = await frontier.job_settings(None)
        rate = getattr(frontier, "pages_per_s", None)
        live = getattr(frontier, "live_workers", None)
        report: dict[str, Any] = {
            "job": job,
            "queued": stats.queued,
            "in_flight": stats.in_flight,
            "delayed": stats.delayed,
            "dead": stats.dead,
            "seen": stats.seen,
            "done": stats.done,
            "stored": None,
            "pages_per_s": round(await rate(), 2) if rate else None,
            "workers": [{"id": wid, "last_seen_s": round(age, 1)} for wid, age in await live()]
            if live
            else [],
            "hosts": [
                {"host": h.host, "queued": h.queued, "in_flight": h.in_flight} for h in stats.hosts
            ],
            "backoff": [
                {
                    "host": b.host,
                    "state": b.state,
                    "pushbacks": b.pushbacks,
                    "failures": b.failures,
                    "until": _iso(b.next_at_ms),
                }
                for b in stats.backoff
            ],
            "engine": "native",
            "pending": None,
        }
        pending = await _celery_pending(frontier)
        if pending is not None:
            report.update(
                engine="celery",
                pending=pending,
                queued=None,
                in_flight=None,
                pages_per_s=None,
                workers=None,
            )
    finally:
        await frontier.close()
    store_url = (settings or {}).get("store")
    own = os.environ.get("CRAWLQ_STORE")  # the job keeps no password: this one may have it
    if isinstance(store_url, str) and own and without_password(own) == without_password(store_url):
        store_url = own
    if isinstance(store_url, str) and ("://" in store_url or Path(store_url).is_file()):
        with contextlib.suppress(CrawlqError):
            store = await open_store(store_url, read_only=True)
            try:
                report["stored"] = (await store.counts()).pages
            finally:
                await store.close()
    return report


def _iso(ms: int) -> str:
    """Unix ms as an ISO 8601 UTC time to the second."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _celery_pending(frontier: Frontier) -> int | None:
    """The pending URLs of a job run by the Celery engine, or None for a native job.

    A job is the Celery engine's when its ``job`` hash says so (field ``engine``, written by
    `crawlq.celery.state.CeleryState.admit`; this module does not import that package, which
    imports celery) or, for a job started before that mark existed, when it has pending URLs.

    Raises:
        FrontierError: Redis does not answer (`FrontierUnavailable`) or refused
            (`crawlq.frontier.redis.errors.translate`).
    """
    client, keys = getattr(frontier, "client", None), getattr(frontier, "keys", None)
    if client is None or keys is None:  # not the Redis frontier: no Celery engine there
        return None
    from redis.exceptions import RedisError

    from crawlq.frontier.redis.errors import translate

    try:
        async with client.pipeline(transaction=False) as pipe:
            pipe.hget(keys.job_info, "engine")
            pipe.hlen(keys.pending)
            engine, pending = await pipe.execute()
    except (RedisError, OSError) as exc:
        raise translate(exc, keys.job) from exc
    if engine == b"celery" or pending:
        return int(pending)
    return None


async def _watch(url: str, job: str, interval: float) -> None:
    from rich.live import Live

    console = stdout_console()
    if not console.is_terminal:  # a file or a pipe: one table per interval, not a live one
        while True:
            console.print(status_table(await _snapshot(url, job)))
            await asyncio.sleep(interval)
    with Live(console=console, auto_refresh=False) as live:
        while True:
            live.update(status_table(await _snapshot(url, job)), refresh=True)
            await asyncio.sleep(interval)
