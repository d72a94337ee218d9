r"""What the Celery engine's shared state answers, and its Redis entries decoded.

Plain frozen values (`Grant`, `Counts`, `TaskState`), the job-hash field that marks a
Celery-engine job (`ENGINE_FIELD`) and the prefix of the run counters (`RUN_PREFIX`).

The ``pending``, ``dead_requests`` and ``running`` entries: ``pending`` and ``dead_requests``
values are ``owner "\n" request JSON``; a ``running`` value is the 20-byte fingerprints of a
task's URLs, concatenated. The keys are shared state: a value that does not decode is skipped
(or its request is None), never an error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from crawlq.frontier.redis.replies import reply_text
from crawlq.request import CrawlRequest

__all__ = [
    "ENGINE_FIELD",
    "RUN_PREFIX",
    "Counts",
    "Grant",
    "TaskState",
    "owner_and_request",
    "packed_fingerprints",
    "pending_requests",
]


ENGINE_FIELD = "engine"
"""Field of the job's ``job`` hash naming the engine that runs it: ``celery`` when set
(`CeleryState.admit`); the Redis frontier reads it for status
(`crawlq.frontier.redis.job`, which spells it again: the frontier does not import the
Celery engine)."""


RUN_PREFIX = "run:"
r"""The prefix of the run counters' fields in the job's ``stats`` hash (``run:items``,
``run:retries``, ``run:dropped\n<reason>``, ...): what the Celery workers' settled outcomes
counted, as a native worker counts its own (`crawlq.engine.outcome.WorkerCounters`); written by
``settle.lua`` (and ``refuse.lua`` for its ``worker_refused`` dead letters)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """The answer of `CeleryState.acquire`.

    Attributes:
        tokens: Slot tokens granted (release each with `CeleryState.release`); empty when
            the host is not ready.
        wait_s: When nothing was granted: seconds until the host's window opens, or None
            when its concurrency is used up (the caller polls).
        down: The host's circuit breaker gave up on it: dead-letter its URLs as
            ``host_unreachable`` without a request (`crawlq.rules.politeness`).
    """

    tokens: tuple[str, ...]
    wait_s: float | None
    down: bool = False


@dataclass(frozen=True, slots=True)
class Counts:
    """The job's counters for progress and completion.

    Attributes:
        pending: URLs admitted and not settled yet (queued, running or waiting for a retry).
        seen: URLs ever admitted (redirect targets claimed by a page included).
        done: URLs settled with a page or filtered record (and claimed redirect targets).
        dead: URLs dead-lettered.
        delayed: Retries scheduled and not started yet (approximate: a worker killed while
            holding one leaves it counted).
        over_budget: New URLs not admitted because their host was at ``max_pages_per_host``.
        frontier_full: Links not followed because Redis was at its ``maxmemory`` when the
            page that found them was stored (counted once per page, at its settle).
    """

    pending: int
    seen: int
    done: int
    dead: int
    delayed: int
    over_budget: int = 0
    frontier_full: int = 0


@dataclass(frozen=True, slots=True)
class TaskState:
    """One URL as the Celery engine's state in Redis knows it.

    The answer of `crawlq.celery.runtime.inspection.Inspection.inspect`.

    Attributes:
        fingerprint: The 20-byte fingerprint.
        state: ``pending`` (admitted, not settled: in the broker's queue, waiting for a
            retry's countdown, or reserved by a worker; Redis cannot tell which),
            ``running`` (a live or dead worker's task holds it now: see ``heartbeat_ms``),
            ``settled`` (its outcome is in the store) or ``unseen`` (never admitted).
        request: The pending request, or a dead-lettered one's (`dead_requests`).
        owner: Who admitted it: the hex fingerprint of the page that found it, ``seed``,
            ``task`` (sent with ``scrape.delay``) or ``replay``.
        due_ms: Pending: the Unix ms by which a task should run it (its countdown's end).
        runner: Running: ``host:pid:thread`` of the worker whose task holds it.
        heartbeat_ms: Running: that worker process's last heartbeat, Unix ms.
    """

    fingerprint: bytes
    state: Literal["pending", "running", "settled", "unseen"]
    request: CrawlRequest | None = None
    owner: str | None = None
    due_ms: int | None = None
    runner: str | None = None
    heartbeat_ms: int | None = None


def owner_and_request(value: Any) -> tuple[str | None, CrawlRequest | None]:
    r"""The owner and request of a ``pending`` value (``owner "\n" request JSON``), leniently."""
    if value is None:
        return None, None
    raw = value.encode() if isinstance(value, str) else bytes(value)
    owner, _, text = raw.partition(b"\n")
    try:
        return reply_text(owner), CrawlRequest.from_json(text)
    except ValueError:  # shared state: whoever can write the key may write anything
        return reply_text(owner), None


def packed_fingerprints(packed: bytes) -> list[bytes]:
    """The 20-byte fingerprints of a ``running`` entry."""
    return [packed[i : i + 20] for i in range(0, len(packed) - 19, 20)]


def pending_requests(values: Sequence[Any]) -> list[CrawlRequest]:
    r"""The requests of ``pending`` values (``owner "\n" request JSON``); others skipped."""
    out = []
    for value in values:
        with contextlib.suppress(ValueError, IndexError, TypeError, AttributeError):
            raw = value.encode() if isinstance(value, str) else value
            out.append(CrawlRequest.from_json(raw.split(b"\n", 1)[1]))
    return out
