"""What the Celery engine's shared state answers: slot grants, counters, one URL's state.

Plain frozen values (`Grant`, `Counts`, `TaskState`) and the job-hash field that marks a
Celery-engine job (`ENGINE_FIELD`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from crawlq.request import CrawlRequest

__all__ = ["ENGINE_FIELD", "RUN_PREFIX", "Counts", "Grant", "TaskState"]


ENGINE_FIELD = "engine"
"""Field of the job's ``job`` hash naming the engine that runs it: ``celery`` when set
(`CeleryState.admit`); the Redis frontier reads it for status
(`crawlq.frontier.redis.stats`, which spells it again: the frontier does not import the
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
    """One URL as the Celery engine's state in Redis knows it (`CeleryState.inspect`).

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
