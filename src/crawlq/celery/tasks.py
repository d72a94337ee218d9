"""crawlq's Celery tasks, the factory of a ready app, and `install` for an app of your own.

Tasks (JSON arguments only):

* ``crawlq.scrape(url, job=None, priority=0, depth=0)``: crawl one URL, as a seed of ``job``
  (default: the ``job`` setting, else ``"celery"``). ``scrape.delay(url)``;
  ``scrape.apply_async(args=[url], priority=9)`` runs before priority 0 on every broker.
* ``crawlq.scrape_many(job, entries)``: several URLs (what the engine sends for discovered
  links, retries and politeness re-schedules; see `crawlq.celery.runtime.wire.Entry`).

Both run `crawlq.celery.runtime.jobs.JobRuntime.run` through `crawlq.celery.delivery.deliver` (which
sends a task again when a backend is down); pages, items and dead letters go to the job's
store. ``scrape`` returns a small dict of what happened to its URL
(`crawlq.celery.runtime.wire`), kept in the app's result backend (`make_app`: the
job's Redis, for ``celery_result_expires_s``); ``scrape_many`` returns nothing. A worker's metrics:
`crawlq.celery.worker_metrics`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from celery import Celery, Task, signals

from crawlq.celery.delivery import deliver
from crawlq.celery.runtime.config import (
    broker_priority,
    celery_config,
    clamp_priority,
    patch_kombu_redis_restore,
    task_queue,
)
from crawlq.celery.runtime.jobs import Runtimes
from crawlq.celery.runtime.wire import MAX_ENTRY_CHARS, Entry, TaskResult, dropped, parse_entries
from crawlq.celery.worker_metrics import serve_worker_metrics
from crawlq.errors import ConfigError
from crawlq.request import CrawlRequest
from crawlq.settings import Settings

__all__ = ["SCRAPE", "SCRAPE_MANY", "CrawlqTask", "CrawlqTasks", "install", "make_app"]

logger = logging.getLogger(__name__)

SCRAPE = "crawlq.scrape"
"""Name of the one-URL task."""

SCRAPE_MANY = "crawlq.scrape_many"
"""Name of the several-URLs task."""


class CrawlqTask(Task):  # type: ignore[misc]  # celery ships no type information
    """Base of crawlq's tasks: ``priority`` is crawlq's (0..9, higher sooner) on any broker.

    `apply_async` turns it into the broker's own scale (`crawlq.celery.runtime.config`); a task sent
    with no priority gets 0, the lowest.
    """

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        *rest: Any,
        **options: Any,
    ) -> Any:
        """Send the task (see ``celery.Task.apply_async``), mapping ``priority``."""
        priority = options.get("priority")
        if self.name == SCRAPE:
            kwargs = dict(kwargs or {})
            if priority is None:
                priority = kwargs.get("priority")
            kwargs.setdefault("priority", clamp_priority(priority))
        options["priority"] = broker_priority(priority, self.app.conf.broker_url)
        return super().apply_async(args, kwargs, *rest, **options)


@dataclass(frozen=True, slots=True)
class CrawlqTasks:
    """The tasks `install` registered on an app.

    Attributes:
        scrape: ``crawlq.scrape``.
        scrape_many: ``crawlq.scrape_many``.
        runtimes: The per-thread runtimes the tasks run on.
        settings: The worker settings they were installed with.
    """

    scrape: Any
    scrape_many: Any
    runtimes: Runtimes
    settings: Settings


def install(app: Celery, settings: Settings | None = None) -> CrawlqTasks:
    """Register crawlq's tasks on ``app`` and route them to crawlq's queue.

    The app's own configuration is left as it is, except that ``settings.celery_queue`` is
    added to ``task_queues`` (declared with ``x-max-priority`` on AMQP) and crawlq's tasks are
    routed to it; the tasks themselves use JSON and late acknowledgement whatever the app's
    defaults. Start workers on that queue (``celery -A yourapp worker -Q crawlq``). For
    priorities on a Redis broker the app also needs ``broker_transport_options``
    ``priority_steps = list(range(10))`` (`crawlq.celery.runtime.config.celery_config` has them).

    Args:
        app: The Celery app.
        settings: crawlq settings for the workers (default: from ``CRAWLQ_*`` variables).

    Returns:
        The registered tasks.

    Raises:
        ConfigError: The settings are invalid.
    """
    settings = settings or Settings.build()
    patch_kombu_redis_restore()  # a Redis restart must not end the worker (celery#9250)
    runtimes = Runtimes(settings)
    queue = task_queue(settings)
    queues = list(app.conf.task_queues or ())
    if all(q.name != queue.name for q in queues):
        app.conf.task_queues = (*queues, queue)
    routes = app.conf.task_routes
    route = {"queue": queue.name, "routing_key": queue.name}
    ours = {SCRAPE: route, SCRAPE_MANY: route}
    if routes is None or isinstance(routes, dict):
        app.conf.task_routes = {**(routes or {}), **ours}
    else:
        app.conf.task_routes = (ours, *routes)
    options: dict[str, Any] = {
        "base": CrawlqTask,
        "bind": True,
        "ignore_result": True,
        "acks_late": True,
        "reject_on_worker_lost": True,
        "serializer": "json",
    }
    # scrape's result (a small dict) goes to the app's result backend; scrape_many's never:
    # the engine sends those by the thousand and nobody waits for them
    results = settings.celery_result_expires_s > 0

    def send(job: str, group: Sequence[Entry], priority: int, countdown_s: float) -> None:
        scrape_many.apply_async(
            args=[job, [e.to_wire() for e in group]],
            priority=priority,
            countdown=countdown_s if countdown_s > 0 else None,
        )

    def run(job: object, entries: list[Entry]) -> list[TaskResult]:
        return deliver(runtimes, settings.job, job, entries, send)

    @app.task(name=SCRAPE, **(options | {"ignore_result": not results}))  # type: ignore[untyped-decorator]
    def scrape(
        self: Any, url: str, job: str | None = None, priority: int = 0, depth: int = 0
    ) -> TaskResult:
        """Crawl ``url`` (a seed of ``job``) and the links it leads to; say what happened.

        Returns:
            The URL's result (`crawlq.celery.runtime.wire`), kept in the app's result
            backend for ``celery_result_expires_s``.
        """
        try:
            if not isinstance(url, str) or len(url) > MAX_ENTRY_CHARS:
                raise ValueError(f"not a URL: {url!r:.200}")
            depth = max(0, depth) if type(depth) is int else depth  # floats etc. are refused
            request = CrawlRequest(url, priority=clamp_priority(priority), depth=depth)
        except Exception as exc:  # the arguments are untrusted: refuse, never fail the worker
            logger.error("scrape: dropped a task that cannot be crawled: %.500s", exc)
            return dropped(url, job, f"cannot be crawled: {exc}")
        found = run(job, [Entry(request)])
        return found[0] if found else dropped(url, job, "no result")

    @app.task(name=SCRAPE_MANY, **options)  # type: ignore[untyped-decorator]
    def scrape_many(self: Any, job: str, entries: list[Any]) -> None:
        """Crawl several URLs of ``job`` (``[request JSON, attempt, retry]`` each)."""
        try:
            parsed = parse_entries(entries)
        except ConfigError as exc:
            logger.error("scrape_many: dropped a task: %s", exc)
            return
        run(job, parsed)

    def shutdown(**_: Any) -> None:
        runtimes.close()

    signals.worker_process_shutdown.connect(shutdown, weak=False)
    signals.worker_shutdown.connect(shutdown, weak=False)
    if settings.metrics_port is not None:
        serve_worker_metrics(settings)
    return CrawlqTasks(scrape, scrape_many, runtimes, settings)


def make_app(settings: Settings | None = None, *, main: str = "crawlq") -> Celery:
    """A Celery app configured for crawlq from ``settings``, with crawlq's tasks installed.

    Args:
        settings: crawlq settings (default: built from the ``CRAWLQ_*`` environment):
            ``broker_url`` (the broker), ``frontier`` (the Redis of dedup and politeness;
            default the broker when it is Redis), ``celery_queue``, ``store``, ``spider``...
        main: The app's name.

    Returns:
        The app; its tasks are also in ``app.crawlq`` (`CrawlqTasks`).

    Raises:
        ConfigError: The settings are invalid.
    """
    settings = settings or Settings.build()
    app = Celery(main, set_as_current=False)
    app.conf.update(celery_config(settings))
    app.crawlq = install(app, settings)
    return app
