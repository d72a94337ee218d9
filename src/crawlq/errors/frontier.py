"""Errors of the frontier backends, the Celery engine's broker and seeding.

A `FrontierError` is permanent (a worker stops on it, keeping its results) unless it is a
`FrontierUnavailable`, which callers ride out with backoff.
"""

from __future__ import annotations

from crawlq.errors.base import CrawlqError

__all__ = [
    "BrokerUnavailable",
    "FrontierError",
    "FrontierFull",
    "FrontierLocked",
    "FrontierUnavailable",
    "JobGone",
    "QueueFullTimeout",
    "SeedInterrupted",
]


class FrontierError(CrawlqError):
    """Base for frontier backend errors.

    Permanent unless it is a `FrontierUnavailable`: retrying the same operation will not
    succeed, so a worker stops on it (keeping its results) instead of retrying forever.
    """


class FrontierUnavailable(FrontierError):
    """The frontier backend cannot be reached or is not ready yet; callers retry with backoff.

    Transient: a connection failure or timeout, or Redis ``LOADING``/``BUSY``/``READONLY``.
    """


class FrontierFull(FrontierError):
    """Redis is at its ``maxmemory`` and refuses writes (``OOM``) until an operator acts.

    Raised by the Redis frontier and the Celery engine's state (`crawlq.frontier.redis.errors`)
    for a step that may grow memory (a push of new URLs, job creation); the steps that drain a
    job go on at ``maxmemory``, so a native worker keeps draining and counts the links it could
    not push (``frontier_full``, `crawlq.engine.outage.FullFrontier`). ``job`` names the job;
    the message says what to do.
    """

    def __init__(self, job: str, detail: str) -> None:
        super().__init__(
            f"Redis is out of memory for job {job!r} ({detail}): it refuses writes at its "
            "maxmemory limit. Raise maxmemory (CONFIG SET maxmemory …, or maxmemory in "
            "redis.conf) or free memory on that Redis, then re-run: the job resumes where it "
            "stopped"
        )
        self.job = job


class JobGone(FrontierError):
    """The shared job this process joined is no longer on its Redis, or another replaced it.

    Every job gets a random id when it is created; each write to it checks that id first
    (`crawlq.frontier.redis`), so a process never writes into a job it did not join. The
    likely causes: Redis restarted without persistence, or the job's keys were deleted.
    ``job`` is the job name; ``joined`` the id this process joined; ``found`` the id there
    now (None: no job of that name).
    """

    def __init__(self, job: str, joined: str | None, found: str | None) -> None:
        if found is None:
            what = (
                f"job {job!r} is gone from its Redis (joined as id {joined}): Redis restarted "
                "without persistence, or the job's keys were deleted"
            )
        else:
            what = (
                f"job {job!r} was replaced on its Redis by a new job of that name (id {found}, "
                f"this process joined {joined}): Redis lost the old one (a restart without "
                "persistence, or the keys were deleted) and it was seeded again"
            )
        super().__init__(
            f"{what}. Nothing more is written to it; pages already stored are kept. Run "
            "Redis with appendonly yes, then seed the job again (re-running the same crawl "
            "or seed command) and restart the workers"
        )
        self.job = job
        self.joined = joined
        self.found = found


class QueueFullTimeout(FrontierError):
    """A producer waited ``max_push_wait_s`` for room in a full frontier (``max_queued``)."""

    def __init__(self, waited_s: float, max_queued: int | None) -> None:
        bound = f"max_queued {max_queued}" if max_queued is not None else "max_queued_per_host"
        super().__init__(
            f"the job's frontier stayed full ({bound}) for {waited_s:g}s: its workers drain it "
            "slower than it is fed"
        )
        self.waited_s = waited_s


class SeedInterrupted(FrontierError):
    """Seeding stopped part way: ``queued`` of ``given`` requests were queued before ``cause``.

    Raised by `crawlq.engine.seeding.seed`. Re-running the same seed resumes it: the job's
    dedup skips what is already queued.
    """

    def __init__(self, queued: int, given: int, cause: FrontierError) -> None:
        if isinstance(cause, FrontierFull):
            what = f"queued {queued} of {given}; {given - queued} refused: Redis is full. {cause}"
        else:
            why = "waiting for room" if isinstance(cause, QueueFullTimeout) else "Redis refused"
            what = f"queued {queued} of {given} before {why}: {cause}"
        super().__init__(
            f"{what}; re-run the same command to resume (already-queued URLs are skipped)"
        )
        self.queued = queued
        self.given = given
        self.cause = cause


class BrokerUnavailable(FrontierUnavailable):
    """The Celery engine's broker cannot be reached or refused the login.

    Raised by `crawlq.celery.crawl` before seeding (so a failed start leaves no job behind)
    and when sending tasks; ``broker`` names the broker without its password.
    """

    def __init__(self, broker: str, detail: str) -> None:
        super().__init__(f"cannot reach the Celery broker {broker}: {detail}")
        self.broker = broker


class FrontierLocked(FrontierError):
    """An embedded frontier file is already used by another live process.

    Raised by `crawlq.frontier.sqlite.SqliteFrontier` at open; ``path`` names the file.
    """

    def __init__(self, path: str, holder: str) -> None:
        super().__init__(f"{path} is in use by another crawlq process ({holder})")
        self.path = path
