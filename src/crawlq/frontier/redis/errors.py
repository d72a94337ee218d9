"""The one place where a Redis error becomes a crawlq error, for every Redis user in crawlq.

The Redis frontier (`crawlq.frontier.redis`), the job commands (`crawlq.frontier.redis.jobs`),
the Celery engine's state (`crawlq.celery.runtime.state`) and ``crawlq status`` all run their Redis
operations through `call` (which applies `translate`), so that one Redis answer means one
thing everywhere:

* connection refused or reset, timeout, ``LOADING``, ``BUSY``, ``MASTERDOWN``, ``READONLY``,
  ``TRYAGAIN``, ``CLUSTERDOWN``: `FrontierUnavailable`, transient: a worker rides it out
  with backoff;
* ``OOM`` (Redis at its ``maxmemory``): `FrontierFull`, refused by a step that may grow memory
  (a push, job creation; the draining scripts run at ``maxmemory``, see
  `crawlq.frontier.redis.scripts`): a worker counts the links it could not push
  (`crawlq.engine.outage.FullFrontier`), a seed stops;
* ``CRAWLQ_JOB_GONE`` (a script's job check, ``check_job`` in ``_lib.lua``): `JobGone`,
  permanent;
* ``MOVED`` or ``ASK`` (a Redis Cluster node that does not serve the job's hash slot):
  `FrontierError`, permanent, saying that crawlq does not support Redis Cluster yet (issue 26)
  and which node serves the slot; `crawlq.frontier.redis.RedisFrontier.open` adds the URL;
* a refused login (``NOAUTH``, ``WRONGPASS``, ``NOPERM``), ``WRONGTYPE``, ``NOSCRIPT`` after a
  reload, anything else: `FrontierError`, permanent.

Messages name the job and never carry a password (`crawlq.errors.CrawlqError` redacts them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    ClusterDownError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawlq.errors import FrontierError, FrontierFull, FrontierUnavailable, JobGone

__all__ = ["JOB_GONE", "TRANSIENT_REPLIES", "call", "translate"]

_T = TypeVar("_T")

JOB_GONE = "CRAWLQ_JOB_GONE"
"""Error reply prefix of a script whose job check failed (``check_job`` in ``_lib.lua``),
followed by the id found (``-`` when the job has none, or does not exist)."""

TRANSIENT_REPLIES = ("LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN")
"""Error replies of a Redis that is restarting, busy or failing over: worth waiting for."""

_AUTH_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM")


def translate(exc: BaseException, job: str, joined: str | None = None) -> FrontierError:
    """The crawlq error for a Redis (or socket) error raised while working on ``job``.

    Args:
        exc: What redis-py (or the socket under it) raised.
        job: The job name, for the message.
        joined: The job id the caller joined (for `JobGone`), if any.

    Returns:
        The error to raise (``from exc``): transient ones are `FrontierUnavailable`.
    """
    text = str(exc)
    code = getattr(exc, "status_code", None)  # redis-py strips a known code from the text
    said = f"{code} {text}" if isinstance(code, str) and code else text
    if isinstance(exc, (AuthenticationError, AuthorizationError, NoPermissionError)):
        return FrontierError(
            f"Redis refused the login for job {job!r}: {said} (check the password or user "
            "in the frontier URL)"
        )
    if isinstance(exc, (BusyLoadingError, ReadOnlyError, TryAgainError, ClusterDownError)) or (
        isinstance(exc, ResponseError) and text.startswith(TRANSIENT_REPLIES)
    ):
        return FrontierUnavailable(f"Redis not ready for job {job!r}: {said}")
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)):
        return FrontierUnavailable(f"Redis unavailable for job {job!r}: {said}")
    if isinstance(exc, OutOfMemoryError) or (
        isinstance(exc, ResponseError) and text.startswith("OOM")
    ):
        return FrontierFull(job, said)
    if isinstance(exc, AskError):  # MovedError too
        slot, _, node = text.partition(" ")
        return FrontierError(
            f"Redis answered {said} for job {job!r}: it is a Redis Cluster node that does not"
            f" serve the job's hash slot {slot} ({node} does). crawlq does not support Redis"
            " Cluster yet (issue 26): point the frontier at a single Redis (a cluster node"
            " works only while it serves the job's slot)"
        )
    if isinstance(exc, ResponseError) and JOB_GONE in text:
        found = text.partition(JOB_GONE)[2].split()[:1]
        return JobGone(job, joined, None if found in ([], ["-"]) else found[0])
    if isinstance(exc, RedisError):
        return FrontierError(f"Redis error for job {job!r}: {said}")
    return FrontierError(f"Redis error for job {job!r}: {type(exc).__name__}: {text}")


async def call(op: Callable[[], Awaitable[_T]], job: str, joined: str | None = None) -> _T:
    """Run one Redis operation (a command, a pipeline or a script) for ``job``.

    Args:
        op: The operation, called once.
        job: The job name, for the message.
        joined: The job id the caller joined (for `JobGone`), if any.

    Returns:
        What ``op`` returned.

    Raises:
        FrontierError: What `translate` makes of a Redis or socket error (`FrontierUnavailable`
            when it is transient).
    """
    try:
        return await op()
    except (RedisError, OSError) as exc:
        raise translate(exc, job, joined) from exc
