"""Running a Celery task's URLs in a worker, and sending them again when a backend is down.

`deliver` checks the task's job name (untrusted: a bad one drops the task with a log line),
runs its entries on this thread's runtime (`crawlq.celery.runtime.jobs.Runtimes`), and when Redis,
the store or the worker's configuration fails (not the URLs' fault: nothing was settled) sends
them again as a new task after `crawlq.engine.outage.celery_resend_delay_s`, with no attempt
counted. When the broker cannot take them either (often the same Redis), it runs them again
here after a backoff (`crawlq.engine.outage.outage_wait_s`), for at most `OUTAGE_GIVE_UP_S`
seconds. A task of a job that is gone (`JobGone`) is dropped: running it would rebuild a
fragment of the lost job.

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
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from crawlq.celery.runtime.config import clamp_priority
from crawlq.celery.runtime.heartbeat import process_id
from crawlq.celery.runtime.jobs import Runtimes
from crawlq.celery.runtime.refusals import REFUSED_DEAD, REFUSED_RESEND
from crawlq.celery.runtime.wire import (
    Entry,
    Publish,
    TaskResult,
    dropped,
    duplicate,
    refused,
    worker_refused,
)
from crawlq.engine.outage import CELERY_BROKER_DOWN_CAP_S, celery_resend_delay_s, outage_wait_s
from crawlq.errors import ConfigError, FrontierFull, FrontierUnavailable, JobGone, StoreUnavailable
from crawlq.settings import check_job_name

__all__ = ["DEFAULT_JOB", "OUTAGE_GIVE_UP_S", "LocalRefusals", "Send", "deliver"]

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
