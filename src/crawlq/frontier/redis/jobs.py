"""The lifecycle of shared jobs: list them, pause and resume them, delete them, let them expire.

Every job of either engine keeps its keys under ``crawlq:{job}:`` (`Keyspace`), and its
``job`` hash says when it was created (``created_ms``, Redis server time), which engine runs
it (``engine``) and whether it is paused (``paused``). This module is the only one that
looks across jobs (``SCAN`` for ``crawlq:{*}:job``).

Pausing is cluster-wide and kills nobody: the native frontier's ``lease.lua`` leases nothing
while the field is set (workers give back finished slots, keep their heartbeats and look
again every `PAUSE_POLL_MS` or when woken), and the Celery engine's ``acquire.lua`` grants no
politeness slot (its tasks come back after `PAUSE_POLL_MS` without spending an attempt).
Producers may still push. Resuming removes the field and wakes idle native workers.

Deleting unlinks every key of the job. It is refused while the job has live workers (a
heartbeat newer than `LIVE_WITHIN_S`) unless forced: a live worker of a deleted job stops at
its next write with `crawlq.errors.JobGone` (its job id is gone) and writes nothing.

Shared state is untrusted: a job hash whose fields are not what this module wrote is shown
with those fields unknown (None), never an exception.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from redis.asyncio import Redis

from crawlq.errors import ConfigError, CrawlqError
from crawlq.frontier.redis.errors import call
from crawlq.frontier.redis.keys import Keyspace
from crawlq.settings.checks import is_redis_url

__all__ = ["LIVE_WITHIN_S", "PAUSE_POLL_MS", "JobAdmin", "JobBusy", "JobInfo", "NoSuchJob"]

PAUSE_POLL_MS = 2000
"""How often a worker of a paused job looks again, in milliseconds."""
LIVE_WITHIN_S = 30.0
"""A worker whose heartbeat is at most this old (seconds) is live (the worker default beats
every 5 s; 30 s leaves room for a slow machine)."""
_WAKE_TOKENS = 64  # at most this many idle workers are woken by a resume

_T = TypeVar("_T")


class NoSuchJob(CrawlqError):
    """The named job has no keys on this Redis."""

    def __init__(self, job: str) -> None:
        super().__init__(f"no job {job!r} on this Redis (crawlq jobs lists them)")
        self.job = job


class JobBusy(CrawlqError):
    """The job has live workers (or unfinished work) and the step was not forced."""


@dataclass(frozen=True, slots=True)
class JobInfo:
    """One job as `JobAdmin.jobs` lists it. Counts are None where the job does not keep them.

    Attributes:
        name: The job name.
        engine: ``"native"`` or ``"celery"``.
        created_at: When the job was created (Unix seconds), None for jobs made before
            crawlq recorded it.
        paused: The job is paused.
        queued: Native: requests waiting in the frontier; Celery: None (in the broker).
        pending: Celery: URLs admitted and not settled yet; native: None.
        in_flight: Native leases held now; Celery: None.
        delayed: Retries waiting for their time.
        done: URLs settled with a stored outcome (pages, filtered, dead).
        dead: Dead letters.
        seen: Distinct URLs ever admitted.
        live_workers: Workers whose heartbeat is newer than `LIVE_WITHIN_S`.
        last_activity: The newest heartbeat or settled page (Unix seconds), or None.
        ttl_s: Seconds until the job's keys expire (`JobAdmin.expire`), or None.
    """

    name: str
    engine: str
    created_at: float | None
    paused: bool
    queued: int | None
    pending: int | None
    in_flight: int | None
    delayed: int
    done: int
    dead: int
    seen: int
    live_workers: int
    last_activity: float | None
    ttl_s: float | None

    @property
    def finished(self) -> bool:
        """Nothing queued, pending, in flight or delayed."""
        return not (self.queued or self.pending or self.in_flight or self.delayed)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        return {**asdict(self), "finished": self.finished}


class JobAdmin:
    """Operations on whole jobs of one Redis database.

    Args:
        client: A redis-py asyncio client (``decode_responses=False``); `open` makes one.
    """

    def __init__(self, client: Redis) -> None:
        self.client = client

    @classmethod
    def open(cls, url: str) -> JobAdmin:
        """A `JobAdmin` on ``url`` (``redis://[:password@]host:port/db``); connects lazily.

        Raises:
            ConfigError: The URL is not a Redis URL.
        """
        if not is_redis_url(url):
            raise ConfigError("frontier", "job commands need a shared job: redis://host:port/DB")
        try:
            client = Redis.from_url(url, decode_responses=False, health_check_interval=10)
        except ValueError as exc:
            raise ConfigError("frontier", f"bad Redis URL: {exc}") from None
        return cls(client)

    async def close(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()

    async def _call(self, job: str, op: Callable[[], Awaitable[_T]]) -> _T:
        return await call(op, job)

    async def names(self) -> list[str]:
        """Every job name on this database, sorted."""
        found: set[str] = set()

        async def scan() -> None:
            async for key in self.client.scan_iter(match=Keyspace.jobs_pattern(), count=1000):
                name = Keyspace.job_of(bytes(key))
                if name is not None:
                    found.add(name)

        await self._call("*", scan)
        return sorted(found)

    async def jobs(self) -> list[JobInfo]:
        """Every job on this database (`JobInfo`), by name; jobs deleted meanwhile are left out."""
        out = []
        for name in await self.names():
            info = await self.info(name)
            if info is not None:
                out.append(info)
        return out

    async def info(self, job: str) -> JobInfo | None:
        """One job's `JobInfo`, or None when it has no ``job`` hash."""
        k = Keyspace(job)
        now_ms = time.time() * 1000

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hgetall(k.job_info)
                pipe.hgetall(k.stats)
                pipe.hlen(k.pending)
                pipe.zcount(k.workers, now_ms - LIVE_WITHIN_S * 1000, "+inf")
                pipe.zrange(k.workers, -1, -1, withscores=True)
                pipe.hvals(k.rate)
                pipe.pttl(k.job_info)
                return await pipe.execute()

        meta, stats, pending, live, newest, rate, ttl_ms = await self._call(job, read)
        if not meta:
            return None
        engine = "celery" if meta.get(b"engine") == b"celery" or pending else "native"
        celery = engine == "celery"
        last = [float(newest[0][1]) / 1000] if newest else []
        for value in rate:
            second = _int(bytes(value).split(b" ", 1)[0])
            if second:
                last.append(float(second))
        created = _int(meta.get(b"created_ms"))
        return JobInfo(
            name=job,
            engine=engine,
            created_at=None if created is None else created / 1000,
            paused=b"paused" in meta,
            queued=None if celery else _count(stats, b"queued"),
            pending=int(pending) if celery else None,
            in_flight=None if celery else _count(stats, b"inflight"),
            delayed=_count(stats, b"delayed"),
            done=_count(stats, b"done"),
            dead=_count(stats, b"dead"),
            seen=_count(stats, b"seen"),
            live_workers=int(live),
            last_activity=max(last) if last else None,
            ttl_s=ttl_ms / 1000 if ttl_ms and ttl_ms > 0 else None,
        )

    async def settings(self, job: str) -> dict[str, Any] | None:
        """The settings ``job`` stored when it was created (None: it has none yet).

        Raises:
            NoSuchJob: The job does not exist.
            CrawlqError: Its settings are not a JSON object (shared state: untrusted).
        """
        await self._require(job)
        k = Keyspace(job)
        raw = await self._call(job, lambda: self.client.hget(k.job_info, "settings"))
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise CrawlqError(f"job {job!r}'s settings in Redis are unreadable: {exc}") from None
        if not isinstance(value, dict):
            raise CrawlqError(f"job {job!r}'s settings in Redis are not a JSON object")
        return value

    async def _require(self, job: str) -> JobInfo:
        info = await self.info(job)
        if info is None:
            raise NoSuchJob(job)
        return info

    async def pause(self, job: str) -> JobInfo:
        """Stop leasing of ``job`` cluster-wide (module docstring). Idempotent.

        Raises:
            NoSuchJob: The job does not exist.
        """
        await self._require(job)
        k = Keyspace(job)
        await self._call(job, lambda: self.client.hset(k.job_info, "paused", str(time.time())))
        return await self._require(job)

    async def resume(self, job: str) -> JobInfo:
        """Let ``job`` lease again and wake its idle workers. Idempotent.

        Raises:
            NoSuchJob: The job does not exist.
        """
        await self._require(job)
        k = Keyspace(job)

        async def resume() -> None:
            await self.client.hdel(k.job_info, "paused")
            idle = int(await self.client.zcard(k.idle))
            if idle:
                await self.client.lpush(k.inbox, *([b""] * min(idle, _WAKE_TOKENS)))

        await self._call(job, resume)
        return await self._require(job)

    async def delete(self, job: str, *, force: bool = False) -> int:
        """Unlink every key of ``job``; returns how many keys were deleted.

        Raises:
            NoSuchJob: The job does not exist.
            JobBusy: It has live workers and ``force`` is False.
        """
        info = await self._require(job)
        if info.live_workers and not force:
            raise JobBusy(
                f"job {job!r} has {info.live_workers} live worker(s): stop them first, or"
                " --force (they stop at their next write, writing nothing more)"
            )
        k = Keyspace(job)

        async def unlink_all() -> int:
            deleted = 0
            batch: list[bytes] = []
            async for key in self.client.scan_iter(match=k.pattern(), count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    deleted += int(await self.client.unlink(*batch))
                    batch = []
            if batch:
                deleted += int(await self.client.unlink(*batch))
            return deleted

        return await self._call(job, unlink_all)

    async def expire(self, job: str, ttl_s: float, *, force: bool = False) -> int:
        """Give every key of ``job`` a time to live of ``ttl_s`` seconds; returns keys set.

        Meant for finished jobs, whose seen set would otherwise stay forever. A job with
        work left is refused unless ``force``: keys made later (a new host's queue) would not
        expire with the rest.

        Raises:
            NoSuchJob: The job does not exist.
            JobBusy: The job is not finished and ``force`` is False.
            ValueError: ``ttl_s`` is not positive.
        """
        if not ttl_s > 0:
            raise ValueError(f"a TTL must be positive seconds, got {ttl_s}")
        info = await self._require(job)
        if not info.finished and not force:
            raise JobBusy(f"job {job!r} is not finished: it has work left (--force to expire)")
        k = Keyspace(job)
        ttl_ms = max(1, round(ttl_s * 1000))

        async def expire_all() -> int:
            done = 0
            async for key in self.client.scan_iter(match=k.pattern(), count=1000):
                done += int(await self.client.pexpire(key, ttl_ms))
            return done

        return await self._call(job, expire_all)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _count(stats: dict[bytes, bytes], name: bytes) -> int:
    return max(0, _int(stats.get(name)) or 0)
