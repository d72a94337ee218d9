"""What ``crawlq status`` needs from a frontier, through the contract: `JobStatus`.

`job_status` is the one call status, the Prometheus exporter and the dashboard make
(`crawlq.ops.report.job_report`). A backend that knows more than `WorkQueue.stats` (the
Redis frontier: throughput, live workers, retries, pause, the Celery engine's pending URLs)
provides ``job_status()`` itself (`ReportsJobStatus`); for any other backend (the embedded
SQLite frontier) the default is built from `WorkQueue.stats` alone, and the fields it cannot
know stay at their "not known" values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from crawlq.frontier.queue import FrontierStats, WorkQueue

if TYPE_CHECKING:  # the Redis frontier's package imports this module
    from crawlq.frontier.redis.refusals import Refusal

__all__ = ["JobStatus", "ReportsJobStatus", "WorkerBeat", "job_status"]


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    """A live worker as its heartbeat shows it.

    Attributes:
        worker_id: The worker's id.
        last_seen_s: Seconds since its last heartbeat.
    """

    worker_id: str
    last_seen_s: float


@dataclass(frozen=True, slots=True)
class JobStatus:
    """A job's status now: its frontier's counts and what operators watch beside them.

    Attributes:
        stats: The frontier's counts (`WorkQueue.stats`).
        engine: ``"native"``, or ``"celery"`` for a job run by the Celery engine, whose URLs
            wait in the broker (``stats.queued`` and ``stats.in_flight`` mean nothing then).
        pending: Celery engine: URLs admitted and not settled yet; None for a native job.
        pages_per_s: Acks per second over the last minute, all workers; None when the
            backend does not count them.
        workers: Workers with a recent heartbeat; empty when the backend keeps none.
        retries: Retries scheduled in the job so far; None when the backend does not count
            them.
        paused: The job is paused (`crawlq job pause`).
        refusals: Celery engine: the workers' last refusals of the job (a store, spider or
            setting mismatch), newest first; empty for a native job.
    """

    stats: FrontierStats
    engine: Literal["native", "celery"] = "native"
    pending: int | None = None
    pages_per_s: float | None = None
    workers: tuple[WorkerBeat, ...] = ()
    retries: int | None = None
    paused: bool = False
    refusals: tuple[Refusal, ...] = ()


@runtime_checkable
class ReportsJobStatus(Protocol):
    """A frontier that reports its job's status itself (more than `WorkQueue.stats`)."""

    async def job_status(self) -> JobStatus:
        """The job's status now.

        Raises:
            FrontierError: The backend cannot be read, or the job does not exist.
        """
        ...


async def job_status(frontier: WorkQueue) -> JobStatus:
    """``frontier``'s job status: its own `ReportsJobStatus.job_status`, or its stats alone.

    Raises:
        FrontierError: The backend cannot be read, or the job does not exist.
    """
    if isinstance(frontier, ReportsJobStatus):
        return await frontier.job_status()
    return JobStatus(await frontier.stats())
