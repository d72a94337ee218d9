"""The Celery broker as ``crawlq crawl --engine celery`` sees it: reachable, its queue, its workers.

A wrong broker URL or login fails before anything is seeded (`check_broker`); the tasks
waiting in the job's queue are counted (`queued_tasks`); and a crawl whose tasks no worker
takes says so once (`NoWorkerWatch`). Broker URLs are shown without their user and password
(`broker_name`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from crawlq.celery.runtime.state import CeleryState
from crawlq.celery.runtime.state_values import Counts
from crawlq.celery.tasks import make_app
from crawlq.errors import BrokerUnavailable
from crawlq.settings import Settings

__all__ = [
    "NO_WORKER_WARN_S",
    "NoWorkerWatch",
    "broker_name",
    "check_broker",
    "error_detail",
    "queued_tasks",
]

logger = logging.getLogger(__name__)

NO_WORKER_WARN_S = 10.0
"""Seconds after which a crawl whose tasks no worker takes says so (once): no URL settled,
no worker heartbeat for the job, and tasks waiting in the broker's queue."""


class NoWorkerWatch:
    """Says once, after `NO_WORKER_WARN_S`, that no Celery worker takes the job's tasks.

    Without it, ``crawl --engine celery`` with no worker consuming its queue (none started,
    or one listening to another queue or broker) would wait silently forever. Once workers
    show up, it says so too.
    """

    def __init__(self, started_s: float) -> None:
        self.started_s = started_s
        self.settled: int | None = None
        self.warned = False

    async def look(self, settings: Settings, app: Any, state: CeleryState, counts: Counts) -> None:
        """Check, at most every poll; logs a warning (or, after one, the recovery) once.

        Args:
            settings: The job's settings (its broker, queue and ``worker_stale_s``).
            app: The command's Celery app (to count the queue's tasks).
            state: The job's Redis state (the workers' heartbeats).
            counts: The job's counts now.
        """
        settled = counts.done + counts.dead
        if self.settled is None:
            self.settled = settled
        if self.warned:
            if settled > self.settled:
                logger.warning("a Celery worker is taking the job's tasks now")
                self.warned = False
                self.started_s = time.monotonic()
                self.settled = settled
            return
        if settled > self.settled:  # work is done: someone consumes
            self.started_s, self.settled = time.monotonic(), settled
            return
        if time.monotonic() - self.started_s < NO_WORKER_WARN_S:
            return
        self.started_s = time.monotonic()  # look again one period later
        if await state.live_workers(settings.worker_stale_s) > 0:
            return
        waiting = queued_tasks(app, settings)
        if waiting == 0:
            return
        s = settings
        logger.warning(
            "no Celery worker has taken a task of job %s for %.0fs: %d tasks wait in queue %r "
            "on %s. Start workers: CRAWLQ_BROKER_URL=%s celery -A crawlq.celery worker -Q %s "
            "(or re-run this command with --processes P to start one here)",
            s.job,
            NO_WORKER_WARN_S,
            waiting,
            s.celery_queue,
            broker_name(s),
            broker_name(s),
            s.celery_queue,
        )
        self.warned = True


def broker_name(settings: Settings) -> str:
    """The broker URL without its user and password."""
    url = settings.broker_url or "?"
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else url


def error_detail(exc: BaseException) -> str:
    """A broker client's error on one line, at most 300 characters, its type named."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def check_broker(settings: Settings) -> None:
    """Connect to the broker once, so a wrong URL or login fails before anything is seeded.

    Raises:
        BrokerUnavailable: The broker cannot be reached or refused the login.
    """
    app = make_app(settings)
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=5)
    except Exception as exc:  # kombu OperationalError, amqp AccessRefused, OSError...
        raise BrokerUnavailable(broker_name(settings), error_detail(exc)) from exc
    finally:
        app.close()


def queued_tasks(app: Any, settings: Settings) -> int:
    """Tasks waiting in the broker's queue now (all priorities; 0 if it does not exist).

    Raises:
        BrokerUnavailable: The broker cannot be reached.
    """
    try:
        with app.connection_for_read() as conn:
            channel = conn.default_channel
            try:
                declared = channel.queue_declare(settings.celery_queue, passive=True)
            except conn.connection_errors:
                raise
            except Exception:  # the broker says the queue does not exist (yet): none queued
                return 0
            return int(declared.message_count)
    except Exception as exc:  # kombu/amqp/redis connection errors
        raise BrokerUnavailable(broker_name(settings), error_detail(exc)) from exc
