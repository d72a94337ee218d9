"""Why Celery workers refuse a job: the records of the job's ``refusals`` hash, read safely.

A Celery worker whose store, spider or a job setting differs from the job's refuses the job's
tasks (`crawlq.engine.job.bind_job` raises `crawlq.errors.ConfigError`); it records why under
its worker name (`crawlq.celery.runtime.refusals.Refusals.refuse`), so that ``crawl --engine
celery`` and ``crawlq status`` can say so. The hash is shared state: whoever can write the job's
keys may write anything there, so `parse_refusal` keeps only well-formed records, with their text
cut to `MAX_REASON_CHARS` and `MAX_WORKER_CHARS`, and `read_refusals` at most `MAX_REFUSERS`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_REASON_CHARS",
    "MAX_REFUSERS",
    "MAX_WORKER_CHARS",
    "Refusal",
    "parse_refusal",
    "read_refusals",
    "refusal_from",
]

MAX_REASON_CHARS = 1000
"""Longest refusal reason kept or shown, in characters."""

MAX_WORKER_CHARS = 200
"""Longest worker name kept or shown, in characters."""

MAX_REFUSERS = 32
"""Most workers whose last refusal a job keeps (the hash's size bound)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A worker's last refusal of a job.

    Attributes:
        worker: The worker's name (``celery@host`` and its process id).
        reason: Why (the `ConfigError` message: the setting, the job's value, the way out).
        at_ms: When, Unix ms.
    """

    worker: str
    reason: str
    at_ms: int

    def to_json(self) -> dict[str, Any]:
        """``{"worker", "reason", "at_ms"}``."""
        return {"worker": self.worker, "reason": self.reason, "at_ms": self.at_ms}

    def encode(self) -> str:
        """The record as stored (JSON, text cut to the bounds)."""
        return json.dumps(
            {
                "worker": self.worker[:MAX_WORKER_CHARS],
                "reason": self.reason[:MAX_REASON_CHARS],
                "at_ms": self.at_ms,
            }
        )


def parse_refusal(raw: Any) -> Refusal | None:
    """A stored record as a `Refusal`, or None when it is not one (shared state: untrusted)."""
    try:
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
        if len(text) > 4 * (MAX_REASON_CHARS + MAX_WORKER_CHARS):
            return None
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return refusal_from(value)


def refusal_from(value: Any) -> Refusal | None:
    """A decoded JSON record as a `Refusal`, or None when it is not one."""
    if not isinstance(value, dict):
        return None
    worker, reason, at_ms = value.get("worker"), value.get("reason"), value.get("at_ms")
    if not isinstance(worker, str) or not isinstance(reason, str):
        return None
    if type(at_ms) is not int or at_ms < 0:
        return None
    return Refusal(worker[:MAX_WORKER_CHARS], reason[:MAX_REASON_CHARS], at_ms)


def read_refusals(values: dict[Any, Any]) -> list[Refusal]:
    """The well-formed records of an ``HGETALL`` of ``refusals``.

    Newest first, at most `MAX_REFUSERS`.
    """
    found = [r for r in (parse_refusal(v) for v in values.values()) if r is not None]
    found.sort(key=lambda r: -r.at_ms)
    return found[:MAX_REFUSERS]
