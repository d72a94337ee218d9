"""The wire format of crawlq's Celery tasks, JSON only: what a task carries and what it answers.

**What a task carries**: one `Entry` per URL. A ``crawlq.scrape_many`` task carries ``(job,
entries)``, each entry ``[request JSON, attempt, retry]`` (`Entry.to_wire`). Anyone who can send
a task sends these, so they are parsed as untrusted input (`Entry.from_wire`, `parse_entries`):
an entry that cannot be crawled is dropped with a log line, never failing the task or the
worker.

**What a scrape task answers**: one small dict per URL (`TaskResult`), whatever happened to it.
``scrape.delay(url).get(timeout=…)`` returns one of these (when the app has a result backend:
`crawlq.celery.runtime.config.celery_config`). Each has ``url`` (as the task ran it, after the
job's URL rules), ``job`` and ``outcome``, plus what explains that outcome; never page content,
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

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from crawlq.engine.outcome import Kind, Outcome
from crawlq.errors import ConfigError
from crawlq.request import CrawlRequest

__all__ = [
    "MAX_ATTEMPT",
    "MAX_ENTRY_CHARS",
    "Entry",
    "Publish",
    "TaskResult",
    "chunks",
    "deferred",
    "dropped",
    "duplicate",
    "outcome_result",
    "parse_entries",
    "refused",
    "worker_refused",
]

logger = logging.getLogger(__name__)

MAX_ENTRY_CHARS = 64 * 1024
"""Longest request JSON in a task entry, in characters (as an inbox entry's byte limit)."""


MAX_ATTEMPT = 1000
"""Largest attempt number a task entry may carry."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One URL in a task message.

    Attributes:
        request: The request.
        attempt: 1 for the first try, +1 per retry of a transient failure.
        retry: This entry was sent as a retry (counted in the job's ``delayed`` until it runs).
    """

    request: CrawlRequest
    attempt: int = 1
    retry: bool = False

    def to_wire(self) -> list[object]:
        """The JSON form in a task message: ``[request JSON, attempt, retry]``."""
        return [self.request.to_json(), self.attempt, self.retry]

    @classmethod
    def from_wire(cls, value: object) -> Entry:
        """Parse `to_wire` output (untrusted: anyone who can send a task sends it).

        Raises:
            ValueError: Not a list of request JSON (at most `MAX_ENTRY_CHARS`, checked by
                `CrawlRequest.from_json`), attempt (an int in ``1..MAX_ATTEMPT``) and retry
                flag (a boolean).
            InvalidURL: The URL cannot be crawled.
        """
        if not isinstance(value, list | tuple) or not value or not isinstance(value[0], str):
            raise ValueError(f"not a crawlq task entry: {value!r:.200}")
        if len(value[0]) > MAX_ENTRY_CHARS:
            raise ValueError(f"task entry of {len(value[0])} characters (most {MAX_ENTRY_CHARS})")
        attempt = value[1] if len(value) > 1 else 1
        if type(attempt) is not int or not 1 <= attempt <= MAX_ATTEMPT:
            raise ValueError(f"attempt must be an integer in 1..{MAX_ATTEMPT}: {attempt!r:.40}")
        retry = value[2] if len(value) > 2 else False
        if not isinstance(retry, bool):
            raise ValueError(f"retry must be true or false, got {retry!r:.40}")
        return cls(CrawlRequest.from_json(value[0]), attempt, retry)


Publish = Callable[[Sequence[Entry], int, float], None]
"""Send entries as one task: ``(entries, crawlq priority 0..9, countdown seconds)``."""


def parse_entries(values: object) -> list[Entry]:
    """Parse a task's entries, dropping (and logging) the ones that cannot be crawled.

    Whatever an entry holds (wrong types, numbers out of range, deep nesting, huge text),
    it is dropped with an error log line; it never fails the task or the worker.

    Raises:
        ConfigError: ``values`` is not a list.
    """
    if not isinstance(values, list | tuple):
        raise ConfigError("entries", f"expected a list of entries, got {values!r:.200}")
    out = []
    for value in values:
        try:
            out.append(Entry.from_wire(value))
        except Exception as exc:  # an entry is untrusted: whatever it raises drops it alone
            logger.error("dropped a task entry that cannot be crawled: %.500s", exc)
    return out


def chunks(entries: list[Entry], size: int) -> list[list[Entry]]:
    """``entries`` in order, in tasks of at most ``size`` (``celery_batch``) each."""
    return [entries[i : i + size] for i in range(0, len(entries), size)]


# -- what a scrape task answers ----------------------------------------------------------------

TaskResult = dict[str, Any]
"""One URL's result of a ``scrape`` task (module docstring)."""

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
