"""What a ``scrape`` task answers: one small dict per URL, whatever happened to it.

``scrape.delay(url).get(timeout=…)`` returns one of these (when the app has a result backend:
`crawlq.celery.runtime.config.celery_config`). Each has ``url`` (as the task ran it, after the job's
URL rules), ``job`` and ``outcome``, plus what explains that outcome; never page content,
which goes to the store:

=============  ==========================================================================
``outcome``    more keys
=============  ==========================================================================
``stored``     ``status`` (HTTP status of the final response), ``final_url``, ``error``
               (why the page was not parsed, or None), ``items`` (how many the spider
               yielded)
``filtered``   ``reason`` (``private_address``, ``robots_txt``, ``out_of_scope`` …)
``dead``       ``reason`` and ``detail`` (``worker_refused`` too, see ``refused``)
``retrying``   ``reason``, ``attempt`` (the one that failed), ``delay_s``: sent again as a
               new task after the delay (its result is not this task's)
``deferred``   ``delay_s``: its host was not ready; sent again as a new task
``duplicate``  the job already has (or is running) this URL: nothing done
``refused``    ``reason``, ``worker``: this worker refuses the job (store, spider or setting
               mismatch); the URL was sent again as a new task, or dead-lettered after
               ``celery_max_refusals`` refusals (outcome ``dead``, reason ``worker_refused``)
``dropped``    ``reason``: the task could not run (not a URL, a bad job name, a lost job)
=============  ==========================================================================
"""

from __future__ import annotations

from typing import Any

from crawlq.celery.runtime.wire import Entry
from crawlq.engine.outcome import Kind, Outcome

__all__ = [
    "TaskResult",
    "deferred",
    "dropped",
    "duplicate",
    "outcome_result",
    "refused",
    "worker_refused",
]

TaskResult = dict[str, Any]
"""One URL's result (module docstring)."""

MAX_TEXT = 500
"""Longest reason or detail text in a result, in characters."""

MAX_URL = 2048
"""Longest URL a ``dropped`` result repeats, in characters (its task's text is untrusted)."""


def _base(entry: Entry, job: str, outcome: str) -> TaskResult:
    return {"url": entry.request.url, "job": job, "outcome": outcome}


def outcome_result(entry: Entry, outcome: Outcome, job: str) -> TaskResult:
    """The result of a URL that ran to ``outcome``."""
    o = outcome
    if o.kind is Kind.PAGE and o.page is not None:
        return _base(entry, job, "stored") | {
            "status": o.page.status,
            "final_url": o.page.final_url,
            "error": o.page.error,
            "items": len(o.items),
        }
    if o.kind is Kind.FILTERED:
        return _base(entry, job, "filtered") | {"reason": o.reason}
    if o.kind is Kind.DEAD:
        detail = o.dead.detail if o.dead is not None else ""
        return _base(entry, job, "dead") | {"reason": o.reason, "detail": detail[:MAX_TEXT]}
    if o.kind is Kind.RETRY:
        return _base(entry, job, "retrying") | {
            "reason": o.reason,
            "attempt": entry.attempt,
            "delay_s": round(o.retry_delay_s, 3),
        }
    return deferred(entry, job, 0.0)


def deferred(entry: Entry, job: str, delay_s: float) -> TaskResult:
    """The result of a URL sent again to wait for its host's politeness slot."""
    return _base(entry, job, "deferred") | {"delay_s": round(delay_s, 3)}


def duplicate(entry: Entry, job: str) -> TaskResult:
    """The result of a URL the job already has."""
    return _base(entry, job, "duplicate")


def refused(entry: Entry, job: str, worker: str, reason: str) -> TaskResult:
    """The result of a URL this worker refused and sent again."""
    return _base(entry, job, "refused") | {"reason": reason[:MAX_TEXT], "worker": worker}


def worker_refused(entry: Entry, job: str, worker: str, reason: str) -> TaskResult:
    """The result of a URL dead-lettered ``worker_refused``."""
    detail = f"worker {worker} refuses job {job}: {reason}"
    return _base(entry, job, "dead") | {"reason": "worker_refused", "detail": detail[:MAX_TEXT]}


def dropped(url: object, job: object, reason: str) -> TaskResult:
    """The result of a task that could not run at all."""
    return {
        "url": url[:MAX_URL] if isinstance(url, str) else None,
        "job": job if isinstance(job, str) else None,
        "outcome": "dropped",
        "reason": reason[:MAX_TEXT],
    }
