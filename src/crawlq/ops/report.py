"""One job's report: the queue length and the numbers operators watch.

What ``crawlq status`` prints, ``crawlq status --prometheus-port`` exports and
``crawlq dashboard`` shows, read the same way for all three, so they agree.

A job run by the Celery engine (``crawlq crawl --engine celery``, ``scrape.delay``) has no
native queues: its URLs wait in the broker, and Redis holds what is admitted and not settled
yet (the ``pending`` hash, see `crawlq.celery.runtime.state`). For such a job the report says
``"engine": "celery"`` and gives ``pending``; ``queued``, ``in_flight``, ``pages_per_s`` and
``workers`` are null (not known to Redis: ask ``celery inspect``); seen, done, dead, delayed
(retries) and stored pages are the same counters as for a native job.

``stored`` counts the pages this job wrote to its store; a store several jobs write into
holds more, which ``stored_total`` gives (see `crawlq.store.Store.counts`).
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crawlq.errors import CrawlqError
from crawlq.frontier import open_frontier
from crawlq.frontier.status import job_status
from crawlq.secrecy import without_password
from crawlq.store import open_store

__all__ = ["job_report", "job_settings", "job_store_url"]


async def job_report(url: str, job: str) -> dict[str, Any]:
    """What ``crawlq status --json`` prints for ``job`` on the frontier at ``url``.

    Keys, in this order: ``job``, ``queued``, ``in_flight``, ``delayed``, ``dead``, ``seen``,
    ``done``, ``stored`` (pages this job wrote to its store, `crawlq.store.Store.counts`
    with the job; None when the store cannot be read), ``pages_per_s`` (acks over the last
    minute), ``workers`` (``id``, ``last_seen_s``), ``hosts`` (the busiest: ``host``,
    ``queued``, ``in_flight``), ``backoff`` (``host``, ``state``, ``pushbacks``,
    ``failures``, ``until`` ISO 8601 UTC), ``engine`` (``native`` or ``celery``), ``pending``
    (Celery engine; module docstring), ``retries`` (scheduled so far), ``refusals``
    (Celery engine: each worker's last refusal of the job, ``worker``, ``reason``,
    ``at_ms``, newest first; empty otherwise), ``paused`` and
    ``stored_total`` (pages in the whole store, every job's and those of none: more than
    ``stored`` when other jobs, or an older crawlq, wrote there; None as ``stored``).

    Raises:
        FrontierError: The frontier cannot be read, or the job does not exist.
        ConfigError: A bad frontier URL or job name.
    """
    frontier = await open_frontier(url, job=job)
    try:
        status = await job_status(frontier)
        stats = status.stats
        settings = await frontier.job_settings(None)
        report: dict[str, Any] = {
            "job": job,
            "queued": stats.queued,
            "in_flight": stats.in_flight,
            "delayed": stats.delayed,
            "dead": stats.dead,
            "seen": stats.seen,
            "done": stats.done,
            "stored": None,
            "pages_per_s": None if status.pages_per_s is None else round(status.pages_per_s, 2),
            "workers": [
                {"id": w.worker_id, "last_seen_s": round(w.last_seen_s, 1)} for w in status.workers
            ],
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
            "retries": status.retries,  # last: scripts index the rest
        }
        report["refusals"] = [r.to_json() for r in status.refusals]
        report["paused"] = status.paused
        report["stored_total"] = None
        if status.engine == "celery":
            report.update(
                engine="celery",
                pending=status.pending,
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
                report["stored"] = (await store.counts(job=job)).pages
                report["stored_total"] = (await store.counts()).pages
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
