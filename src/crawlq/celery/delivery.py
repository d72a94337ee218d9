"""Running a Celery task's URLs in a worker, and sending them again when a backend is down.

`deliver` checks the task's job name (untrusted: a bad one drops the task with a log line),
runs its entries on this thread's runtime (`crawlq.celery.runtime.Runtimes`), and when Redis,
the store or the worker's configuration fails (not the URLs' fault: nothing was settled) sends
them again as a new task after `crawlq.engine.outage.celery_resend_delay_s`, with no attempt
counted. When the broker cannot take them either (often the same Redis), it runs them again
here after a backoff (`crawlq.engine.outage.outage_wait_s`), for at most `OUTAGE_GIVE_UP_S`
seconds. A task of a job that is gone (`JobGone`) is dropped: running it would rebuild a
fragment of the lost job.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence

from crawlq.celery.config import clamp_priority
from crawlq.celery.runtime import Runtimes
from crawlq.celery.wire import Entry
from crawlq.engine.outage import CELERY_BROKER_DOWN_CAP_S, celery_resend_delay_s, outage_wait_s
from crawlq.errors import ConfigError, FrontierFull, FrontierUnavailable, JobGone, StoreUnavailable
from crawlq.settings import check_job_name

__all__ = ["DEFAULT_JOB", "OUTAGE_GIVE_UP_S", "Send", "deliver"]

logger = logging.getLogger(__name__)

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
) -> None:
    """Run one task's entries of ``job`` in this worker (module docstring).

    Args:
        runtimes: This worker's runtimes.
        default_job: The ``job`` setting, for a task that names none (else `DEFAULT_JOB`).
        job: The job the task names (untrusted: checked here).
        entries: The task's entries.
        send: Sends entries as a new task: ``(job, entries, priority, countdown seconds)``.

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
        return

    def publish(group: Sequence[Entry], priority: int, countdown_s: float) -> None:
        send(job, group, priority, countdown_s)

    if not entries:
        return
    give_up = time.monotonic() + OUTAGE_GIVE_UP_S
    for tries in itertools.count(1):
        try:
            runtimes.run(job, entries, publish)
            return
        except JobGone as exc:
            # the job these URLs belong to is lost: running them would rebuild a fragment
            logger.error("job %s: %s; dropping this task's %d URLs", job, exc, len(entries))
            return
        except (FrontierUnavailable, FrontierFull, StoreUnavailable, ConfigError) as exc:
            # not the URLs' fault: nothing was settled, so send them again (no attempt
            # counted)
            delay = celery_resend_delay_s()
            logger.warning(
                "job %s: %s; sending the task's %d URLs again in %.1fs",
                job,
                exc,
                len(entries),
                delay,
            )
            band = max(clamp_priority(e.request.priority) for e in entries)
            try:
                publish(entries, band, delay)
                return
            except Exception as failed:  # the broker is down too (often the same Redis)
                if time.monotonic() > give_up:
                    raise
                wait = outage_wait_s(tries, CELERY_BROKER_DOWN_CAP_S)
                logger.warning(
                    "job %s: cannot send them either (%s); running them again in %.1fs",
                    job,
                    failed,
                    wait,
                )
                time.sleep(wait)
