"""The state every part of the Redis frontier shares, and how it talks to Redis.

`RedisClient` holds the client, the job's `Keyspace`, the job id it joined, the politeness
rules, the clock, the dedup mode and the inbox settings. Every command goes through
`RedisClient._call` (one round trip, errors translated by `crawlq.frontier.redis.errors.call`),
every script through `RedisClient._script` (which passes the job id for ``check_job``). The
parts of `crawlq.frontier.redis.RedisFrontier` are classes over this one, one per contract
(`crawlq.frontier.contract`) in the module of the contract's name, plus the inbox and the idle
wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlq.clock import Clock, Every, SystemClock
from crawlq.frontier.queue import FULL_LOG_EVERY_S, QueueBounds
from crawlq.frontier.redis.bloom import BloomDedup
from crawlq.frontier.redis.errors import call
from crawlq.frontier.redis.keys import Keyspace
from crawlq.frontier.redis.scripts import SCRIPTS
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import Politeness

__all__ = ["INBOX_MAX_ENTRY_BYTES", "InboxFilter", "RedisClient"]


_T = TypeVar("_T")

INBOX_MAX_ENTRY_BYTES = 64 * 1024
"""Default largest inbox entry, in bytes (`RedisFrontier.inbox_max_entry_bytes`)."""

InboxFilter = Callable[[CrawlRequest], CrawlRequest | str]
"""Decides whether an inbox request may be queued: the request to queue (the job's URL rules
may rewrite it), or the reason to reject it."""


class RedisClient:
    """What every part of `crawlq.frontier.redis.RedisFrontier` shares.

    The client, the job's keys and id, its rules, and the one way to run a command or a
    script.

    Args: see `crawlq.frontier.redis.RedisFrontier`.
    """

    def __init__(
        self,
        client: Redis,
        job: str,
        politeness: Politeness,
        clock: Clock | None = None,
        bloom: BloomDedup | None = None,
        job_id: str | None = None,
        *,
        bounds: QueueBounds | None = None,
        inbox_max_entry_bytes: int = INBOX_MAX_ENTRY_BYTES,
    ) -> None:
        self.client = client
        self.keys = Keyspace(job)
        self.job = job
        self.job_id = job_id
        self.politeness = politeness
        self.round_trips = 0
        self.clock: Clock = clock or SystemClock()
        self.bloom = bloom
        self._claim_pending: set[str] = set()
        self._last_recover = 0.0
        self._heartbeats: set[str] = set()  # worker ids that beat through this frontier
        self._robots_warned: set[str] = set()
        self.inbox_filter: InboxFilter | None = None
        """Checks each inbox request before it is queued (method, scope): set by the engine,
        which knows the job's rules; None queues every valid request."""
        self.inbox_full = False
        """The last inbox drain found the job at its ``block`` bound and took nothing."""
        self.bounds = bounds or QueueBounds()
        """The job's queue bounds (`crawlq.frontier.queue.QueueBounds`), given at open."""
        self.paused = False
        """The job was paused at this frontier's last lease (`crawlq.frontier.redis.jobs`)."""
        self.inbox_max_entry_bytes = inbox_max_entry_bytes
        """Largest inbox entry accepted, in bytes; a larger one is rejected unread."""
        self.full = False
        """Redis refused the last inbox drain at its ``maxmemory`` (`FrontierFull`): its
        entries wait in the inbox, and an idle wait polls instead of blocking."""
        self._full_log = Every(FULL_LOG_EVERY_S, self.clock)

    async def _call(self, op: Callable[[], Awaitable[_T]]) -> _T:
        """Run one Redis operation (one round trip), errors translated (`errors.call`)."""
        self.round_trips += 1
        return await call(op, self.job, self.job_id)

    async def _script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        job = (self.keys.job_info, self.job_id or "")
        return await self._call(lambda: SCRIPTS[name].run(self.client, keys, args, job))

    def _dedup_args(self) -> tuple[str, str, int]:
        if self.bloom is None:
            return self.keys.seen, "set", 0
        return self.keys.bloom, "bloom", self.bloom.hashes

    def _policy_args(self) -> tuple[int, int]:
        return round(self.politeness.default.delay_s * 1000), self.politeness.default.concurrency

    async def close(self) -> None:
        """Close the connection pool; leases still held expire normally.

        The workers that beat through this frontier (`renew`) leave the job's live workers
        first, so that ``crawlq status`` stops counting a worker that has stopped at once,
        not when its heartbeat goes stale (30 s); their inbox claims, if any, go back to the
        inbox as a dead worker's would. A worker killed without closing stays until stale.

        A cancellation that arrives while closing (Ctrl-C of ``crawlq status --watch``) still
        lets the pool close, then is raised again: swallowing it left the cancelled command
        running as if nothing had happened.
        """
        cancelled = await _quietly(self._leave_live_workers)
        interrupted = await _quietly(self.client.aclose)
        if interrupted is not None:  # cut short mid-disconnect: finish, or a socket stays open
            await _quietly(self.client.aclose)
        cancelled = cancelled or interrupted
        if cancelled is not None:
            raise cancelled

    async def _leave_live_workers(self) -> None:
        if self._heartbeats:
            await self.client.zrem(self.keys.workers, *sorted(self._heartbeats))
            self._heartbeats.clear()


async def _quietly(step: Callable[[], Awaitable[Any]]) -> asyncio.CancelledError | None:
    """Run one step of `RedisClient.close`; return its cancellation, if it was cancelled.

    Redis and socket errors are dropped (the connection is going away anyway); a
    cancellation is returned for the caller to raise once the other steps ran.
    """
    try:
        await step()
    except (RedisError, OSError):
        pass
    except asyncio.CancelledError as exc:
        return exc
    return None
