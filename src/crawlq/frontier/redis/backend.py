"""The distributed frontier: a crawl job's queues, leases and seen set in Redis.

Every multi-key step is one Lua script (see the ``.lua`` files beside this module and the key
table in `crawlq.frontier.redis.keys`), so any number of workers on any number of machines
share one consistent frontier. "Now" is the calling worker's clock, passed to every script
(docs/architecture.md: worker clocks are assumed to agree to well under the smallest host delay).

Round trips: a lease is one pipelined read (expired leases, due retries, ready hosts, inbox
length) plus one script; push, ack and the other settles are one script per batch.

Waiting: a worker with nothing to lease registers in ``idle`` and blocks on ``BLMOVE`` of the
job's inbox into its claim list, with a timeout that ends when the next host window opens,
retry falls due or lease expires. Pushes and settles that make a host ready put one empty
wake-up token per idle worker on the inbox; producers' own ``LPUSH`` wakes a worker the same
way. No polling.

Persistence: Redis is the frontier's only copy. Run it with ``appendonly yes`` (AOF) for a
crawl that must survive a Redis restart; without persistence a restart loses the whole
frontier (seen set, queues, leases) — pages already in the store stay there, but the crawl
cannot resume.

Job identity: a job gets a random id when it is created (``job_open.lua``); every process
that joins it reads the id at `RedisFrontier.open` and every script that writes checks it
first (``check_job`` in ``_lib.lua``). After a restart without persistence, or once the job's
keys are deleted, or replaced by a new job of the same name, every write raises
`crawlq.errors.JobGone` and writes nothing: a worker never rebuilds a fragment of a lost job.

Key layout: a job records the layout it was created with (`crawlq.frontier.redis.keys.LAYOUT`,
field ``layout`` of its ``job`` hash). A job of layout 1 (created before issue 26, with a
``scores`` hash and the host in each record) that still holds requests is refused when opened
(`crawlq.errors.FrontierError`, naming the job), not read: its scores are in a key this layout
no longer reads, so a released or requeued request would lose its place. Finish it with the
crawlq that created it, or delete it (``crawlq job delete``) and seed it again. A job of
layout 1 with no request left (no ``scores`` key) holds nothing that differs and is joined.

Errors: every Redis error goes through `crawlq.frontier.redis.errors.call`.

Layout: this module holds `RedisFrontier` itself (opening and joining a job, its status,
dropping it), built from one class per contract (`crawlq.frontier.contract`), each in the
module of the contract's name over `crawlq.frontier.redis.client.RedisClient`: ``queue``
(with ``inbox``, the push step and producers' entries, and ``idle``, the wait), ``hosts``,
``robots``, ``job``, ``inspection``, ``items``; Bloom dedup is `crawlq.frontier.redis.bloom`.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.exceptions import AskError

from crawlq.clock import Clock
from crawlq.errors import ConfigError, FrontierError
from crawlq.frontier.queue import QueueBounds
from crawlq.frontier.redis.bloom import BloomDedup
from crawlq.frontier.redis.client import INBOX_MAX_ENTRY_BYTES
from crawlq.frontier.redis.hosts import RedisHostRules
from crawlq.frontier.redis.inspection import RedisInspection
from crawlq.frontier.redis.items import RedisItemKeys
from crawlq.frontier.redis.job import RedisJobRecord
from crawlq.frontier.redis.keys import LAYOUT, Keyspace
from crawlq.frontier.redis.queue import RedisWorkQueue
from crawlq.frontier.redis.refusals import read_refusals
from crawlq.frontier.redis.replies import reply_text
from crawlq.frontier.redis.robots import RedisRobots
from crawlq.frontier.status import JobStatus, WorkerBeat
from crawlq.rules.politeness import HostPolicy, Politeness
from crawlq.rules.politeness import rules_with_default as _rules
from crawlq.settings.checks import REDIS_TCP_SCHEMES

__all__ = ["RedisFrontier"]


class RedisFrontier(
    RedisWorkQueue, RedisHostRules, RedisRobots, RedisJobRecord, RedisInspection, RedisItemKeys
):
    """`crawlq.frontier.contract.Frontier` on Redis, shared by every worker of a job.

    Create with `RedisFrontier.open`. The methods' semantics are the contract's; the notes
    here are what Redis adds.

    Args:
        client: A ``redis.asyncio.Redis`` with ``decode_responses=False``.
        job: The job name; all keys live under ``crawlq:{job}:``.
        politeness: The job's host politeness rules.
        clock: Source of "now".
        bloom: Bloom-filter dedup settings, or None for the exact set.
        job_id: The id of the job this client joined (`join_job`); None when it joined none
            (the job did not exist): every write then raises `crawlq.errors.JobGone`.
    """

    @classmethod
    async def open(
        cls,
        url: str,
        job: str,
        *,
        default_policy: HostPolicy | None = None,
        politeness: Politeness | None = None,
        clock: Clock | None = None,
        bloom: BloomDedup | None = None,
        create: bool = False,
        bounds: QueueBounds | None = None,
        inbox_max_entry_bytes: int = INBOX_MAX_ENTRY_BYTES,
    ) -> RedisFrontier:
        """Connect to ``url`` (``redis://[:password@]host:port/db`` or ``rediss://``).

        The job's dedup mode is fixed when the job is created (``create``, by its first seed
        or crawl, which also gives it its random id); everyone else adopts it, and joins the
        job's id: writes check it (module docstring). Opening does not write anything unless
        ``create`` is set (or the job exists without an id: it gets one), so a worker or a
        status query of a job that was never seeded leaves no trace. The job's queue
        ``bounds`` and politeness are fixed here, and so is the largest inbox entry it takes.

        Raises:
            FrontierUnavailable: The server cannot be reached.
            ConfigError: A bad URL or job name, or ``bloom`` disagrees with the job's mode.
        """
        try:
            parts = urlsplit(url)
            hostname = parts.hostname
        except ValueError as exc:  # e.g. an unclosed "[" of an IPv6 address
            raise ConfigError("frontier", f"bad Redis URL {url!r}: {exc}") from None
        db = parts.path.lstrip("/")
        tcp = url.startswith(REDIS_TCP_SCHEMES)
        if tcp and (not hostname or (not db.isdigit() and db)):
            raise ConfigError("frontier", f"bad Redis URL {url!r}: want redis://host:port/DB")
        try:
            client = Redis.from_url(url, decode_responses=False, health_check_interval=10)
            keys = Keyspace(job)
        except ValueError as exc:
            raise ConfigError("frontier", f"bad Redis URL or job {url!r} {job!r}: {exc}") from exc
        rules = _rules(politeness, default_policy)
        self = cls(
            client,
            job,
            rules,
            clock,
            bloom,
            bounds=bounds,
            inbox_max_entry_bytes=inbox_max_entry_bytes,
        )
        self.keys = keys
        try:
            wanted = (bloom.spec() if bloom else "set").encode()
            try:
                self.job_id, actual = await self._join(create, wanted)
            except TypeError as exc:  # redis-py: an unknown ?option= of the URL
                raise ConfigError("frontier", f"bad Redis URL {url!r}: {exc}") from None
            except FrontierError as exc:
                if isinstance(exc.__cause__, AskError):  # a Redis Cluster node: name the URL
                    raise FrontierError(f"frontier {url}: {exc}") from exc.__cause__
                raise
            if actual is not None and actual != wanted:
                have = actual.decode() if isinstance(actual, bytes) else str(actual)
                if bloom is not None or not have.startswith("bloom "):
                    raise ConfigError(
                        "bloom", f"job {job!r} dedups with {have}, not {wanted.decode()}"
                    )
                _, capacity, rate = have.split()
                self.bloom = BloomDedup(int(capacity), float(rate))  # adopt the job's mode
            if self.job_id is not None:
                await self._check_layout()
        except BaseException:
            await client.aclose()
            raise
        return self

    async def _join(self, create: bool, dedup: bytes) -> tuple[str | None, bytes | None]:
        """Read the job's id and dedup mode (``job_open.lua``), creating the job if asked."""
        args = ["1" if create else "0", secrets.token_hex(8), dedup]
        job_id, actual = await self._script("job_open", [self.keys.job_info], args)
        return (None if job_id is None else reply_text(job_id)), actual

    async def _check_layout(self) -> None:
        """Refuse a job whose requests are in an older key layout (module docstring).

        Raises:
            FrontierError: The job is of layout 1 and still holds requests.
        """
        k = self.keys

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hget(k.job_info, "layout")
                pipe.exists(k.scores)
                return await pipe.execute()

        layout, old_scores = await self._call(read)
        if layout is None and old_scores:
            raise FrontierError(
                f"job {self.job!r} was created by an older crawlq, in Redis key layout 1 (a"
                f" 'scores' hash and the host in every request record); this crawlq reads"
                f" layout {LAYOUT} only. Finish the job with the crawlq that created it, or"
                f" delete it (crawlq job delete {self.job}) and seed it again"
            )

    async def job_status(self) -> JobStatus:
        """See `crawlq.frontier.status.JobStatus`.

        A job is the Celery engine's when its ``job`` hash says so (field ``engine``, written
        by `crawlq.celery.runtime.state.CeleryState.admit`) or, for a job started before that mark
        existed, when it has pending URLs.

        Raises:
            FrontierError: Redis cannot be read, or the job does not exist (`stats`).
        """
        k = self.keys
        stats = await self.stats()
        pages_per_s = await self.pages_per_s()
        workers = tuple(WorkerBeat(w, age) for w, age in await self.live_workers())
        retries = await self.retries_total()

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hexists(k.job_info, "paused")
                pipe.hget(k.job_info, "engine")
                pipe.hlen(k.pending)
                pipe.hgetall(k.refusals)
                return await pipe.execute()

        paused, engine, pending, refusals = await self._call(read)
        celery = engine == b"celery" or bool(pending)
        return JobStatus(
            stats,
            engine="celery" if celery else "native",
            pending=int(pending) if celery else None,
            pages_per_s=pages_per_s,
            workers=workers,
            retries=retries,
            paused=bool(paused),
            refusals=tuple(read_refusals(refusals)) if celery else (),
        )

    async def drop(self) -> int:
        """Delete every key of the job (the crawl's frontier, not its store). Returns keys."""

        async def drop_all() -> int:
            deleted = 0
            async for key in self.client.scan_iter(match=self.keys.pattern(), count=1000):
                deleted += int(await self.client.unlink(key))
            return deleted

        return await self._call(drop_all)
