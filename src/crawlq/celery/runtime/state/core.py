"""What every part of the Celery engine's state shares: one job on one Redis connection.

`StateCore.open` joins (or creates) the job and its id; every command runs through
`StateCore._call` and every script through `StateCore._script`, so a Redis error is translated
by `crawlq.frontier.redis.errors.call` as for the native frontier, and every write checks the
job id (``check_job`` in ``_lib.lua``).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlq.clock import Clock, SystemClock
from crawlq.errors import ConfigError, JobGone
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.frontier.redis.errors import call
from crawlq.frontier.redis.scripts import SCRIPTS as FRONTIER_SCRIPTS
from crawlq.frontier.redis.scripts import Script
from crawlq.rules.politeness import Politeness
from crawlq.settings import check_job_name

__all__ = ["SCRIPTS", "StateCore"]


_T = TypeVar("_T")
SCRIPTS = {
    name: Script(name, "crawlq.celery.runtime")
    for name in (
        "admit", "take", "settle", "acquire", "orphans", "start_task", "reschedule", "inspect",
        "replay", "refuse",
    )
}  # fmt: skip
"""The Celery engine's scripts (``*.lua`` in `crawlq.celery`), by name.

A Redis at its ``maxmemory`` (``noeviction``) still runs the ones that move or delete a job's
entries or write small per-host and per-worker ones (``take``, ``settle``, ``acquire``,
``orphans``, ``start_task``, ``reschedule``, and the process heartbeat's ``heartbeat``: they
open with ``#!lua flags=allow-oom``, see `crawlq.frontier.redis.scripts`), so the tasks
already sent run to their end; ``admit`` (new URLs), ``replay`` and ``refuse`` are refused
(`crawlq.errors.FrontierFull`)."""


class StateCore:
    """The connection, the job and its id, and the one way to run a command or a script.

    Args: see `crawlq.celery.runtime.state.CeleryState`.
    """

    def __init__(
        self, client: Redis, job: str, clock: Clock | None = None, job_id: str | None = None
    ) -> None:
        self.client = client
        self.job = job
        self.job_id = job_id
        self.keys = Keyspace(job)
        self.clock: Clock = clock or SystemClock()
        self._token_prefix = secrets.token_hex(6)
        self._token_seq = 0
        self._marked = False
        self.dead_workers = 0
        """Worker threads found dead by `orphans` through this instance."""

    @classmethod
    async def open(cls, url: str, job: str, *, expect_id: str | None = None) -> Self:
        """Connect to the Redis at ``url`` (``redis://host:port/db``) and join ``job``.

        A job that does not exist is created (id included): a task may name a job nobody
        seeded. With ``expect_id`` (the id this process joined before), the job must still
        have that id: a process never recreates a job it saw lost.

        Raises:
            ConfigError: A bad URL (naming ``frontier``) or job name (naming ``job``; see
                `crawlq.settings.JOB_NAME_RULE`).
            FrontierUnavailable: The server does not answer.
            JobGone: ``expect_id`` is given and the job is gone or has another id.
        """
        check_job_name(job)
        try:
            client = Redis.from_url(url, decode_responses=False, health_check_interval=10)
            self = cls(client, job)
        except ValueError as exc:
            raise ConfigError("frontier", f"bad Redis URL {url!r}: {exc}") from exc
        try:
            create = "0" if expect_id else "1"
            args = [create, secrets.token_hex(8), "set"]
            job_id, _ = await self._call(
                lambda: FRONTIER_SCRIPTS["job_open"].run(client, [self.keys.job_info], args)
            )
            found = None if job_id is None else bytes(job_id).decode()
            if expect_id is not None and found != expect_id:
                raise JobGone(job, expect_id, found)
            self.job_id = found
        except BaseException:
            await client.aclose()
            raise
        return self

    def frontier(self, politeness: Politeness) -> RedisFrontier:
        """A `RedisFrontier` view of the job on the same connection.

        The engine uses it for what the two engines share beyond dedup: the job's stored
        settings (`crawlq.engine.job.bind_job`) and host politeness (`process`: pauses,
        Crawl-delay).
        """
        return RedisFrontier(self.client, self.job, politeness, self.clock, job_id=self.job_id)

    async def _call(self, op: Callable[[], Awaitable[_T]]) -> _T:
        return await call(op, self.job, self.job_id)

    async def _script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        job = (self.keys.job_info, self.job_id or "")
        return await self._call(lambda: SCRIPTS[name].run(self.client, keys, args, job))

    async def close(self) -> None:
        """Close the connection pool."""
        with contextlib.suppress(RedisError, OSError):
            await self.client.aclose()
