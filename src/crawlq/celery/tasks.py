"""crawlq's Celery tasks, the factory of a ready app, and `install` for an app of your own.

Tasks (JSON arguments only):

* ``crawlq.scrape(url, job=None, priority=0, depth=0)``: crawl one URL, as a seed of ``job``
  (default: the ``job`` setting, else ``"celery"``). ``scrape.delay(url)``;
  ``scrape.apply_async(args=[url], priority=9)`` runs before priority 0 on every broker.
* ``crawlq.scrape_many(job, entries)``: several URLs (what the engine sends for discovered
  links, retries and politeness re-schedules; see `crawlq.celery.runtime.wire.Entry`).

Both run `crawlq.celery.runtime.jobs.JobRuntime.run` through `deliver` (below); pages, items and
dead letters go to the job's store. ``scrape`` returns a small dict of what happened to its URL
(`crawlq.celery.runtime.wire`), kept in the app's result backend (`make_app`: the job's Redis,
for ``celery_result_expires_s``); ``scrape_many`` returns nothing. A worker's metrics:
`serve_worker_metrics`.

**Delivery** (`deliver`: running a task's URLs in a worker, and sending them again when a
backend is down). `deliver` checks the task's job name (untrusted: a bad one drops the task with
a log line), runs its entries on this thread's runtime (`crawlq.celery.runtime.jobs.Runtimes`),
and when Redis, the store or the worker's configuration fails (not the URLs' fault: nothing was
settled) sends them again as a new task after `crawlq.engine.outage.celery_resend_delay_s`, with
no attempt counted. When the broker cannot take them either (often the same Redis), it runs them
again here after a backoff (`crawlq.engine.outage.outage_wait_s`), for at most
`OUTAGE_GIVE_UP_S` seconds. A task of a job that is gone (`JobGone`) is dropped: running it
would rebuild a fragment of the lost job.

A Redis at its ``maxmemory`` does not send a task back: the runtime runs it, refusing only
its new links (`crawlq.celery.runtime.jobs`). A `FrontierFull` that still reaches `deliver` comes
from a step that must grow memory before anything was settled (creating a job nobody
seeded): the task is sent again, as for an outage, until Redis has room.

A worker that refuses the job (`crawlq.errors.ConfigError`: its store, spider or a setting
differs from the job's) says so in the job's Redis (worker, reason, time; what ``crawl
--engine celery`` and ``crawlq status`` show) and sends the URLs again for another worker,
but not forever: a URL refused ``celery_max_refusals`` (5) times is dead-lettered
``worker_refused`` (`_refused`).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from celery import Celery, Task, signals

from crawlq.celery.runtime.config import (
    broker_priority,
    celery_config,
    clamp_priority,
    patch_kombu_redis_restore,
    task_queue,
)
from crawlq.celery.runtime.heartbeat import process_id
from crawlq.celery.runtime.jobs import Runtimes
from crawlq.celery.runtime.refusals import REFUSED_DEAD, REFUSED_RESEND
from crawlq.celery.runtime.wire import (
    MAX_ENTRY_CHARS,
    Entry,
    Publish,
    TaskResult,
    dropped,
    duplicate,
    parse_entries,
    refused,
    worker_refused,
)
from crawlq.engine.outage import CELERY_BROKER_DOWN_CAP_S, celery_resend_delay_s, outage_wait_s
from crawlq.errors import ConfigError, FrontierFull, FrontierUnavailable, JobGone, StoreUnavailable
from crawlq.request import CrawlRequest
from crawlq.settings import Settings, check_job_name

__all__ = [
    "DEFAULT_JOB",
    "OUTAGE_GIVE_UP_S",
    "SCRAPE",
    "SCRAPE_MANY",
    "CrawlqTask",
    "CrawlqTasks",
    "LocalRefusals",
    "Send",
    "deliver",
    "install",
    "make_app",
    "serve_worker_metrics",
]

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


# -- delivery: run a task's URLs, send them again while a backend is down -------------------


OUTAGE_GIVE_UP_S = 600.0
"""Seconds a task whose Redis (or store) and broker are both down keeps trying before it
fails (its message then comes back after the broker's visibility timeout)."""

DEFAULT_JOB = "celery"
"""Job of ``scrape`` calls that name none, when the ``job`` setting is not set either."""

Send = Callable[[str, Sequence[Entry], int, float], None]
"""Send entries as a new task of a job: ``(job, entries, crawlq priority 0..9, countdown s)``."""


def deliver(
    runtimes: Runtimes,
    default_job: str | None,
    job: object,
    entries: list[Entry],
    send: Send,
) -> list[TaskResult]:
    """Run one task's entries of ``job`` in this worker (module docstring).

    Args:
        runtimes: This worker's runtimes.
        default_job: The ``job`` setting, for a task that names none (else `DEFAULT_JOB`).
        job: The job the task names (untrusted: checked here).
        entries: The task's entries.
        send: Sends entries as a new task: ``(job, entries, priority, countdown seconds)``.

    Returns:
        One result per entry (`crawlq.celery.runtime.wire`).

    Raises:
        Exception: The broker could not take the entries back for `OUTAGE_GIVE_UP_S`
            seconds while a backend was down (the message comes back after the broker's
            visibility timeout).
    """
    job = job or default_job or DEFAULT_JOB
    try:
        job = check_job_name(job) if isinstance(job, str) else check_job_name(repr(job))
    except ConfigError as exc:  # not the worker's configuration: sending it again is futile
        logger.error("dropped a task of %d URLs: %s", len(entries), exc)
        return [dropped(e.request.url, job, str(exc)) for e in entries]

    def publish(group: Sequence[Entry], priority: int, countdown_s: float) -> None:
        send(job, group, priority, countdown_s)

    give_up = time.monotonic() + OUTAGE_GIVE_UP_S
    for tries in itertools.count(1):
        if not entries:
            return []
        try:
            return runtimes.run(job, entries, publish)
        except JobGone as exc:
            # the job these URLs belong to is lost: running them would rebuild a fragment
            logger.error("job %s: %s; dropping this task's %d URLs", job, exc, len(entries))
            return [dropped(e.request.url, job, str(exc)) for e in entries]
        except ConfigError as exc:  # this worker refuses the job: say so, send back, bounded
            results, again = _refused(runtimes, job, entries, exc)
        except (FrontierUnavailable, FrontierFull, StoreUnavailable) as exc:
            # not the URLs' fault: nothing was settled, so send them again (no attempt
            # counted; a full Redis refused a step that must grow memory, see above)
            results, again = [], entries
            logger.warning("job %s: %s; sending the task's %d URLs again", job, exc, len(again))
        if not again or _send_again(job, again, publish, tries, give_up):
            return results
    raise AssertionError("unreachable")  # pragma: no cover


def _send_again(
    job: str, entries: list[Entry], publish: Publish, tries: int, give_up: float
) -> bool:
    """Send ``entries`` again as a new task after `celery_resend_delay_s`; True when sent.

    False when the broker cannot take them either, after waiting a backoff (the caller runs
    them again here).

    Raises:
        Exception: The broker's error, once `OUTAGE_GIVE_UP_S` have passed.
    """
    band = max(clamp_priority(e.request.priority) for e in entries)
    try:
        publish(entries, band, celery_resend_delay_s())
        return True
    except Exception as failed:  # the broker is down too (often the same Redis)
        if time.monotonic() > give_up:
            raise
        wait = outage_wait_s(tries, CELERY_BROKER_DOWN_CAP_S)
        logger.warning(
            "job %s: cannot send them either (%s); running them again in %.1fs", job, failed, wait
        )
        time.sleep(wait)
        return False


def _refused(
    runtimes: Runtimes, job: str, entries: list[Entry], exc: ConfigError
) -> tuple[list[TaskResult], list[Entry]]:
    """This worker refuses ``job`` (``exc``): record it, and say which entries to send again.

    The refusal is recorded in the job's Redis (`Runtimes.refuse`), where each URL's refusals
    are counted for every worker; a URL refused ``celery_max_refusals`` times is
    dead-lettered ``worker_refused`` there. When it cannot be recorded (no Redis for the
    job's state), this process counts them itself (`LocalRefusals`) and drops the URL at
    the limit.

    Returns:
        The entries' results and the entries to send again.
    """
    reason = str(exc)
    worker = process_id()
    limit = runtimes.settings.celery_max_refusals
    verdicts = runtimes.refuse(job, entries, reason)
    if verdicts is None:
        verdicts = _LOCAL.count(job, entries, limit)
    results: list[TaskResult] = []
    again: list[Entry] = []
    for entry, verdict in zip(entries, verdicts, strict=True):
        if verdict == REFUSED_RESEND:
            again.append(entry)
            results.append(refused(entry, job, worker, reason))
        elif verdict == REFUSED_DEAD:
            results.append(worker_refused(entry, job, worker, reason))
        else:
            results.append(duplicate(entry, job))
    gone = len(entries) - len(again)
    logger.error(
        "worker %s refuses job %s: %s; sending %d URLs again, %d given up (a URL refused %d "
        "times is dead-lettered worker_refused)",
        worker,
        job,
        reason,
        len(again),
        gone,
        limit,
    )
    return results, again


class LocalRefusals:
    """Refusals counted by this process when they cannot be recorded in Redis (bounded)."""

    MAX_URLS = 10_000
    """Most URLs counted at once (the oldest are forgotten first)."""

    def __init__(self) -> None:
        self._counts: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, job: str, entries: Sequence[Entry], limit: int) -> list[int]:
        """Count one refusal of each entry: `REFUSED_RESEND`, or `REFUSED_DEAD` at ``limit``.

        At the limit the URL is dropped: nothing here can record its dead letter.
        """
        out = []
        with self._lock:
            for entry in entries:
                key = (job, entry.request.fingerprint)
                n = self._counts.pop(key, 0) + 1
                if n >= limit:
                    out.append(REFUSED_DEAD)
                    continue
                self._counts[key] = n
                while len(self._counts) > self.MAX_URLS:
                    self._counts.popitem(last=False)
                out.append(REFUSED_RESEND)
        return out


_LOCAL = LocalRefusals()


# -- the worker's metrics ---------------------------------------------------------------------


def serve_worker_metrics(settings: Settings) -> None:
    """Serve the worker metrics of a Celery worker and its pool on ``settings.metrics_port``.

    When the worker starts (``worker_init``, in its main process, before the pool forks),
    the main process serves the summed metrics of itself and its pool processes
    (`crawlq.engine.metrics.MultiprocessExporter`, which records here too: the forked pool
    processes inherit that and write files of their own); a pool process that exits has
    its live gauges dropped.
    """
    exporters: list[Any] = []

    def start(**_: Any) -> None:
        from crawlq.engine.metrics import MultiprocessExporter

        port, host = settings.metrics_port, settings.metrics_host
        assert port is not None
        exporters.append(MultiprocessExporter(port, host, adopt=True))

    def process_gone(**_: Any) -> None:
        for exporter in exporters:
            exporter.process_dead(os.getpid())

    def stop(**_: Any) -> None:
        while exporters:
            exporters.pop().close()

    signals.worker_init.connect(start, weak=False)
    signals.worker_process_shutdown.connect(process_gone, weak=False)
    signals.worker_shutdown.connect(stop, weak=False)
