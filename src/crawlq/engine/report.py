"""One job's report: the queue length and the numbers operators watch.

What ``crawlq status`` prints, ``crawlq status --prometheus-port`` exports and
``crawlq dashboard`` shows, read the same way for all three, so they agree.

A job run by the Celery engine (``crawlq crawl --engine celery``, ``scrape.delay``) has no
native queues: its URLs wait in the broker, and Redis holds what is admitted and not settled
yet (the ``pending`` hash, see `crawlq.celery.state`). For such a job the report says
``"engine": "celery"`` and gives ``pending``; ``queued``, ``in_flight``, ``pages_per_s`` and
``workers`` are null (not known to Redis: ask ``celery inspect``); seen, done, dead, delayed
(retries) and stored pages are the same counters as for a native job.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crawlq.errors import CrawlqError
from crawlq.frontier import Frontier, open_frontier
from crawlq.secrecy import without_password
from crawlq.store import open_store

__all__ = ["job_report", "job_settings", "job_store_url"]


async def job_report(url: str, job: str) -> dict[str, Any]:
    """What ``crawlq status --json`` prints for ``job`` on the frontier at ``url``.

    Keys, in this order: ``job``, ``queued``, ``in_flight``, ``delayed``, ``dead``, ``seen``,
    ``done``, ``stored`` (pages in the job's store, None when it
    cannot be read), ``pages_per_s`` (acks over the last minute), ``workers`` (``id``,
    ``last_seen_s``), ``hosts`` (the busiest: ``host``, ``queued``, ``in_flight``),
    ``backoff`` (``host``, ``state``, ``pushbacks``, ``failures``, ``until`` ISO 8601 UTC),
    ``engine`` (``native`` or ``celery``), ``pending`` (Celery engine; module docstring) and
    ``retries`` (scheduled so far).

    Raises:
        FrontierError: The frontier cannot be read, or the job does not exist.
        ConfigError: A bad frontier URL or job name.
    """
    frontier = await open_frontier(url, job=job)
    try:
        stats = await frontier.stats()
        settings = await frontier.job_settings(None)
        rate = getattr(frontier, "pages_per_s", None)
        live = getattr(frontier, "live_workers", None)
        retries = getattr(frontier, "retries_total", None)
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
            "retries": await retries() if retries else None,  # last: scripts index the rest
        }
        report["paused"] = await _paused(frontier, job)
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
    store_url = job_store_url(settings)
    if store_url is not None:
        with contextlib.suppress(CrawlqError):
            store = await open_store(store_url, read_only=True)
            try:
                report["stored"] = (await store.counts()).pages
            finally:
                await store.close()
    return report


async def job_settings(url: str, job: str) -> dict[str, Any] | None:
    """The settings a job stored when it was seeded (None: none stored).

    Raises:
        FrontierError: The frontier cannot be read.
    """
    frontier = await open_frontier(url, job=job)
    try:
        return await frontier.job_settings(None)
    finally:
        await frontier.close()


def job_store_url(settings: dict[str, Any] | None) -> str | None:
    """The store URL a job's settings name, or None (none, or a SQLite file not here).

    ``CRAWLQ_STORE`` wins when it names the same store: the job keeps no password.
    """
    store_url = (settings or {}).get("store")
    own = os.environ.get("CRAWLQ_STORE")  # the job keeps no password: this one may have it
    if isinstance(store_url, str) and own and without_password(own) == without_password(store_url):
        store_url = own
    if isinstance(store_url, str) and ("://" in store_url or Path(store_url).is_file()):
        return store_url
    return None


def _iso(ms: int) -> str:
    """Unix ms as an ISO 8601 UTC time to the second."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _paused(frontier: Frontier, job: str) -> bool:
    """Whether the job is paused (`crawlq job pause`); False for a frontier without jobs."""
    client = getattr(frontier, "client", None)
    if client is None:
        return False
    from crawlq.frontier.redis.jobs import JobAdmin

    info = await JobAdmin(client).info(job)
    return info is not None and info.paused


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
