"""Crawl frontiers: the contract (`Frontier`) and `open_frontier` to pick a backend by URL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawlq.clock import Clock
from crawlq.errors import ConfigError
from crawlq.frontier.contract import Frontier
from crawlq.frontier.queue import FrontierStats, HostStats, QueueBounds
from crawlq.frontier.status import JobStatus, job_status
from crawlq.rules.politeness import HostPolicy, Politeness
from crawlq.settings.checks import is_redis_url

if TYPE_CHECKING:
    from crawlq.frontier.redis import BloomDedup

__all__ = [
    "Frontier",
    "FrontierStats",
    "HostPolicy",
    "HostStats",
    "JobStatus",
    "job_status",
    "open_frontier",
]


async def open_frontier(
    url: str,
    *,
    job: str | None = None,
    default_policy: HostPolicy | None = None,
    politeness: Politeness | None = None,
    clock: Clock | None = None,
    bloom: BloomDedup | None = None,
    create: bool = False,
    bounds: QueueBounds | None = None,
    inbox_max_entry_bytes: int | None = None,
) -> Frontier:
    """Open the frontier named by ``url``.

    Args:
        url: A SQLite file path or ``sqlite:///path`` (the embedded default, one process), or
            ``redis://[:password@]host:port/db`` / ``rediss://…`` (shared by many workers).
        job: The job name; required for Redis, where several jobs share a server.
        default_policy: Politeness of hosts without an override (shorthand for ``politeness``
            with that default and nothing else).
        politeness: The job's host politeness rules.
        clock: Source of "now" (tests).
        bloom: Redis only: Bloom-filter dedup instead of the exact seen set.
        create: Redis only: create the job if it does not exist (producers); workers and
            status queries leave a job they cannot find untouched.
        bounds: The job's queue bounds (`crawlq.frontier.queue.QueueBounds`); unbounded when
            None. Fixed for the life of the opened frontier, as its politeness is.
        inbox_max_entry_bytes: Redis only: the largest inbox entry taken, in bytes (None:
            `crawlq.frontier.redis.INBOX_MAX_ENTRY_BYTES`).

    Raises:
        ConfigError: The URL names no supported backend, or Redis without a job.
        FrontierLocked: The SQLite file is owned by another live process.
        FrontierUnavailable: The backend cannot be opened or reached.
    """
    if is_redis_url(url):
        if not job:
            raise ConfigError("job", f"a job name is needed with the Redis frontier {url}")
        try:
            from crawlq.frontier.redis import INBOX_MAX_ENTRY_BYTES, RedisFrontier
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError(
                "frontier",
                f"the Redis frontier needs redis-py: pip install 'crawlq[redis]' ({exc})",
            ) from exc
        return await RedisFrontier.open(
            url,
            job,
            default_policy=default_policy,
            politeness=politeness,
            clock=clock,
            bloom=bloom,
            create=create,
            bounds=bounds,
            inbox_max_entry_bytes=inbox_max_entry_bytes or INBOX_MAX_ENTRY_BYTES,
        )
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    if "://" in path:
        raise ConfigError(
            "frontier", f"{url}: expected a SQLite file path, sqlite:///path or redis://…"
        )
    from crawlq.frontier.sqlite import SqliteFrontier

    return await SqliteFrontier.open(
        path, default_policy=default_policy, politeness=politeness, clock=clock, bounds=bounds
    )
