"""The Celery engine's shared state in Redis: dedup, pending URLs, politeness slots, counters.

A Celery broker only carries messages; what the native frontier does beside queueing lives
here, under the same job keys (`crawlq.frontier.redis.Keyspace`), one Lua script per atomic
step (``admit.lua``, ``settle.lua``, ``acquire.lua`` beside this module, loaded with the
frontier's `crawlq.frontier.redis.scripts.Script`):

* **Dedup** (``admit``): a URL's fingerprint enters ``seen`` once and stays in ``pending``
  until its outcome is stored (``settle``). Two workers discovering one URL at once enqueue it
  once. A task delivered again after its worker died re-enqueues the links it had admitted
  (they are pending under its own fingerprint), so a crash between admitting and publishing
  loses nothing.
* **A full Redis** (``maxmemory``, ``noeviction``): only ``admit`` is refused
  (`crawlq.errors.FrontierFull`): a task takes its pending URLs (``take``), runs and settles
  them, and the links its pages find are not followed, counted in ``frontier_full``
  (`crawlq.celery.runtime.writes`); so the job drains and its crawl ends.
* **Done**: the crawl is finished when ``pending`` is empty: every admitted URL has a stored
  outcome (page, filtered or dead letter).
* **Politeness** (``acquire``): a host's next-allowed time and its held slots (each with a
  hold deadline, so that a killed worker's slot comes back) move in one step for all workers.
* **Dead workers** (``orphans``): each worker process records a heartbeat in ``workers``
  (`crawlq.celery.runtime.heartbeat.Heartbeat`, a thread of its own, every ``heartbeat_s``),
  and each task the fingerprints it runs in ``running`` (`CeleryState.start_task`). When a
  worker's heartbeat is stale, the URLs it was running and that are still pending are taken in
  one step, and the caller sends them again: a killed worker's URLs need not wait for the
  broker's visibility timeout.
* **Dead letters** (``settle``, ``replay``): a dead-lettered URL's request is kept in
  ``dead_requests`` (its reason and detail are in the store), so that ``crawlq dead replay``
  can make it pending again and send it as it was
  (`crawlq.celery.runtime.inspection.Inspection.replay`).
* **Inspection** (``inspect``): one read of a URL's pending entry, due time and the runner
  whose task holds it (`crawlq.celery.runtime.inspection.Inspection.inspect`).
* **Engine mark**: the first `CeleryState.admit` of each instance sets the field ``engine`` of
  the job's ``job`` hash to ``celery`` (if unset), so that ``crawlq status`` reads the Celery
  counters of the job (``pending``) instead of the native frontier's queues.
* **Job identity**: `CeleryState.open` joins the job's id (creating the job, id included,
  for a task of a job nobody seeded) and every script checks it first, as the native
  frontier's do (``check_job`` in ``_lib.lua``): once the job is gone (a Redis restart
  without persistence, deleted keys) or replaced, writes raise `crawlq.errors.JobGone` and
  write nothing, and `CeleryState.counts` raises it too, so ``crawl --engine celery`` stops
  instead of reporting a lost crawl as done. Redis errors are translated by
  `crawlq.frontier.redis.errors.call`, as for the frontier.

One class, `CeleryState`, its methods in the order of a URL's life: joining the job
(connection, job id, error translation), dedup and pending URLs (admit, take, settle,
reschedule, stale), the tasks' runners and dead workers' URLs, host slots, and the counters.
Its two narrower parts take a `CeleryState` and run through its `CeleryState.call` and
`CeleryState.script`: the operator's reads and replays
(`crawlq.celery.runtime.inspection.Inspection`) and the workers that refuse the job
(`crawlq.celery.runtime.refusals.Refusals`). The values it answers with and the decoding of
its entries are in `crawlq.celery.runtime.state_values`; the process heartbeat is
`crawlq.celery.runtime.heartbeat`.

This module and the heartbeat are the only parts of the Celery engine that import redis.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Self, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlq.celery.runtime.state_values import (
    ENGINE_FIELD,
    RUN_PREFIX,
    Counts,
    Grant,
    packed_fingerprints,
    pending_requests,
)
from crawlq.clock import Clock, SystemClock
from crawlq.errors import ConfigError, FrontierFull, JobGone
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.frontier.redis.errors import call as translated
from crawlq.frontier.redis.jobs import PAUSE_POLL_MS
from crawlq.frontier.redis.scripts import SCRIPTS as FRONTIER_SCRIPTS
from crawlq.frontier.redis.scripts import Script
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import HostPolicy, Politeness
from crawlq.settings import check_job_name

__all__ = [
    "SCRIPTS",
    "TAKE_DUPLICATE",
    "TAKE_RUN",
    "TAKE_UNSEEN",
    "CeleryState",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
SCRIPTS = {
    name: Script(name, "crawlq.celery.runtime")
    for name in (
        "admit", "take", "settle", "acquire", "orphans", "start_task", "reschedule", "inspect",
        "replay", "refuse",
    )
}  # fmt: skip
"""The Celery engine's scripts (``*.lua`` in `crawlq.celery.runtime`), by name.

A Redis at its ``maxmemory`` (``noeviction``) still runs the ones that move or delete a job's
entries or write small per-host and per-worker ones (``take``, ``settle``, ``acquire``,
``orphans``, ``start_task``, ``reschedule``, and the process heartbeat's ``heartbeat``: they
open with ``#!lua flags=allow-oom``, see `crawlq.frontier.redis.scripts`), so the tasks
already sent run to their end; ``admit`` (new URLs), ``replay`` and ``refuse`` are refused
(`crawlq.errors.FrontierFull`)."""

TAKE_DUPLICATE = 0
"""`CeleryState.take`: the URL is settled (its outcome is stored): do not run it."""

TAKE_RUN = 1
"""`CeleryState.take`: the URL is pending: run it."""

TAKE_UNSEEN = 2
"""`CeleryState.take`: the URL was never admitted (a ``scrape.delay`` task): admit it."""


class CeleryState:
    """One job's Celery-engine state on one Redis connection (used from one event loop).

    Args:
        client: A ``redis.asyncio.Redis`` with ``decode_responses=False``.
        job: The job name.
        clock: Source of "now" (Unix ms), passed to the scripts.
        job_id: The job's id (`open` reads it); None: no job joined, every write fails.
    """

    # -- the job on one connection ------------------------------------------------------------

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
            job_id, _ = await self.call(
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

    async def call(self, op: Callable[[], Awaitable[_T]]) -> _T:
        """Run one Redis command (or pipeline) of the job, its errors translated.

        Raises:
            FrontierError: What `crawlq.frontier.redis.errors.call` makes of a Redis error.
        """
        return await translated(op, self.job, self.job_id)

    async def script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run the script ``name`` of `SCRIPTS`, which checks the job's id first.

        Raises:
            JobGone: The job is gone or replaced: the script wrote nothing.
            FrontierError: See `call`.
        """
        job = (self.keys.job_info, self.job_id or "")
        return await self.call(lambda: SCRIPTS[name].run(self.client, keys, args, job))

    async def close(self) -> None:
        """Close the connection pool."""
        with contextlib.suppress(RedisError, OSError):
            await self.client.aclose()

    # -- dedup and pending URLs (admit, take, settle, reschedule) -------------------------------

    async def admit(
        self,
        entries: Sequence[tuple[CrawlRequest, str]],
        *,
        run: bool,
        budget: int | None = None,
    ) -> list[bool]:
        """Mark URLs seen and pending; say which to enqueue (or, with ``run``, to run).

        The URLs returned True are due now: a task should run them within the visibility
        timeout (`stale` finds the ones whose task message was lost).

        Args:
            entries: ``(request, owner)`` per URL; the owner is who admits it: the hex
                fingerprint of the page that found it, or a tag (``"seed"``, ``"task"``).
            run: False before enqueueing discovered links or seeds: True for the new ones and
                for those still pending under the same owner (its task was delivered again
                after a crash and must publish them again). True when a task is about to run
                them: True for new and for pending ones, False for settled ones.
            budget: The job's ``max_pages_per_host``: a host admits at most this many
                fingerprints over the job's life (counted here for every worker at once); a
                new one over it is False, not marked seen, and counted in ``over_budget``.
                None: no budget.

        Returns:
            One bool per entry.

        Raises:
            FrontierFull: Redis is at its ``maxmemory``: nothing was admitted.
            FrontierUnavailable: Redis does not answer.
        """
        if not entries:
            return []
        k = self.keys
        args: list[Any] = ["run" if run else "push", self.clock.wall_ms()]
        args.append(-1 if budget is None else budget)
        for request, owner in entries:
            args += [request.fingerprint, owner, request.to_json(), request.host]
        keys = [k.seen, k.pending, k.pending_at, k.stats, k.admitted]
        flags = await self.script("admit", keys, args)
        if not self._marked:  # once per instance (after the job check): a Celery-engine job
            try:
                await self.call(lambda: self.client.hsetnx(k.job_info, ENGINE_FIELD, "celery"))
                self._marked = True
            except FrontierFull:  # the URLs are admitted: the mark waits for the next admit
                logger.debug("job %s: Redis is full; the engine mark waits", self.job)
        return [bool(x) for x in flags]

    async def take(self, fingerprints: Sequence[bytes], *, retries_started: int = 0) -> list[int]:
        """A task is about to run these URLs: which are pending (due now), settled or unseen.

        One step (``take.lua``) that adds no entry, so it runs on a Redis at its
        ``maxmemory`` too: the tasks already sent run. A URL never admitted (`TAKE_UNSEEN`,
        a ``scrape.delay`` task) is the caller's to `admit` with ``run``.

        Args:
            fingerprints: The task's URLs.
            retries_started: Retries among them, which leave the ``delayed`` count.

        Returns:
            One of `TAKE_RUN`, `TAKE_DUPLICATE`, `TAKE_UNSEEN` per fingerprint.

        Raises:
            JobGone: The job is gone or replaced.
            FrontierUnavailable: Redis does not answer.
        """
        if not fingerprints:
            return []
        k = self.keys
        args: list[Any] = [self.clock.wall_ms(), max(0, retries_started), *fingerprints]
        got = await self.script("take", [k.seen, k.pending, k.pending_at, k.stats], args)
        return [int(x) for x in got]

    async def settle(
        self,
        done: Sequence[bytes],
        dead: Sequence[bytes],
        answered: Sequence[str] = (),
        *,
        frontier_full: int = 0,
        run_counts: Sequence[Mapping[str, int]] = (),
    ) -> int:
        """Take URLs whose outcome is stored out of ``pending`` (idempotent).

        Runs on a Redis at its ``maxmemory`` (``settle.lua``).

        Args:
            done: Fingerprints stored as a page or filtered record.
            dead: Fingerprints dead-lettered.
            answered: Hosts that answered a request: their strikes in a row and breaker flags
                are cleared, as an ack does in the native frontier.
            frontier_full: Links of these pages that `admit` could not admit (Redis at its
                ``maxmemory``): added to the job's ``frontier_full`` count
                (`crawlq.celery.runtime.state_values.Counts`) if this call settles any URL, so a
                task run again after it settled counts them once.
            run_counts: One mapping per fingerprint of ``done`` then ``dead`` (or none): the
                run counters of its outcome
                (`crawlq.celery.runtime.writes.outcome_counts`), added to the job's stats with
                the prefix `RUN_PREFIX` for each fingerprint that was still pending
                (`CeleryState.run_counts` reads them back).

        Returns:
            How many were still pending.

        Raises:
            ValueError: ``run_counts`` is given and not one per fingerprint.
        """
        if not done and not dead and not answered:
            return 0
        fps = [*done, *dead]
        if run_counts and len(run_counts) != len(fps):
            raise ValueError(f"{len(run_counts)} run counts for {len(fps)} fingerprints")
        counts = [
            json.dumps({RUN_PREFIX + f: n for f, n in c.items() if n}) if c else ""
            for c in run_counts
        ] or [""] * len(fps)
        k = self.keys
        args = [len(done), len(answered), max(0, frontier_full), *answered, *fps, *counts]
        keys = [k.pending, k.pending_at, k.stats, k.strikes, k.policy, k.dead_requests]
        return int(await self.script("settle", keys, args))

    async def reschedule(
        self, fingerprints: Sequence[bytes], delay_s: float, *, retries: int = 0
    ) -> None:
        """Record that pending URLs were sent with a countdown: they run in ``delay_s`` s.

        Their due time (``pending_at``, Unix ms) moves to now + ``delay_s``, and ``retries``
        are counted as `add_delayed` counts them, in one step (``reschedule.lua``, which runs
        on a Redis at its ``maxmemory`` too).
        """
        if not fingerprints and not retries:
            return
        due_ms = self.clock.wall_ms() + round(delay_s * 1000)
        keys = [self.keys.pending_at, self.keys.stats]
        await self.script("reschedule", keys, [due_ms, retries, *fingerprints])

    async def stale(self, late_s: float, limit: int = 500) -> list[CrawlRequest]:
        """Pending URLs due more than ``late_s`` seconds ago: their task message was lost.

        A Redis broker loses a message that a worker popped and was killed before recording
        it as unacknowledged (celery/celery#7950), and keeps the tasks a killed worker had
        reserved (countdown tasks wait in the worker) until its visibility timeout; the URL
        stays pending with no task. The caller sends such URLs again (a duplicate fetch at
        worst: the store keeps one copy). URLs that a live worker runs now are left out.
        """
        k = self.keys
        before = self.clock.wall_ms() - round(late_s * 1000)
        found = await self.call(
            lambda: self.client.zrangebyscore(k.pending_at, "-inf", before, start=0, num=limit)
        )
        fps: list[bytes] = [fp for fp in found if isinstance(fp, bytes)]
        if fps:  # a URL that a live worker runs now is late, not lost
            running = await self.call(lambda: self.client.hvals(k.running))
            busy = {
                fp
                for packed in running
                if isinstance(packed, bytes)
                for fp in packed_fingerprints(packed)
            }
            fps = [fp for fp in fps if fp not in busy]
        if not fps:
            return []
        values = await self.call(lambda: self.client.hmget(k.pending, fps))
        out = []
        for value in values:
            if value is not None:
                with contextlib.suppress(ValueError, IndexError):
                    raw = value.encode() if isinstance(value, str) else value
                    out.append(CrawlRequest.from_json(raw.split(b"\n", 1)[1]))
        return out

    async def add_delayed(self, n: int) -> None:
        """Count ``n`` retries scheduled (negative: started).

        A positive ``n`` also counts in the job's retries ever scheduled (``retries``, for
        ``crawlq dashboard``). Runs on a Redis at its ``maxmemory`` (``reschedule.lua``).
        """
        await self.reschedule((), 0.0, retries=n)

    # -- tasks' runners, dead workers' URLs (start_task, orphans) -------------------------------

    async def start_task(self, runner: str, fingerprints: Sequence[bytes]) -> None:
        """Record that ``runner`` runs these URLs now, with a heartbeat of its process.

        Args:
            runner: ``process_id()`` and ``":"`` and the thread: one task at a time.
            fingerprints: The URLs its task is about to run (replacing its earlier task's).

        Runs on a Redis at its ``maxmemory`` (``start_task.lua``: one entry per runner).

        Raises:
            JobGone: The job is gone or replaced.
            FrontierUnavailable: Redis does not answer.
        """
        k = self.keys
        process = runner.rpartition(":")[0]
        args = [runner, process, self.clock.wall_ms(), b"".join(fingerprints)]
        await self.script("start_task", [k.running, k.workers], args)

    async def end_task(self, runner: str) -> None:
        """``runner``'s task is over: its URLs are settled or sent again as new tasks."""
        await self.call(lambda: self.client.hdel(self.keys.running, runner))

    async def orphans(self, stale_s: float) -> list[CrawlRequest]:
        """Take the pending URLs of workers whose heartbeat is older than ``stale_s`` seconds.

        Each one is returned once (one atomic step, ``orphans.lua``) and its due time is set
        to now; the caller sends them again. A URL that the dead worker had settled is not
        returned; one that it had sent again as a retry may be (a duplicate fetch at worst:
        the store keeps one copy).
        """
        k = self.keys
        now = self.clock.wall_ms()
        stale_ms = max(1, round(stale_s * 1000))
        got = await self.call(lambda: self.client.hgetall(k.running))
        running = {
            r: fps for r, fps in got.items() if isinstance(r, bytes) and isinstance(fps, bytes)
        }
        if not running:
            return []
        runners = list(running)
        processes: list[Any] = [r.rpartition(b":")[0] for r in runners]
        beats = await self.call(lambda: self.client.zmscore(k.workers, processes))
        dead = [
            runner
            for runner, beat in zip(runners, beats, strict=True)
            if beat is None or beat < now - stale_ms
        ]
        if not dead:
            return []
        self.dead_workers += len(dead)
        fps = [fp for runner in dead for fp in packed_fingerprints(running[runner])]
        values = await self.call(lambda: self.client.hmget(k.pending, fps)) if fps else []
        hosts = {r.host for r in pending_requests(values)}
        keys = [k.running, k.workers, k.pending, k.pending_at, *(k.slots(h) for h in hosts)]
        flat = await self.script("orphans", keys, [now, stale_ms])
        return pending_requests(flat[1::2])

    # -- host politeness slots (acquire) -------------------------------------------------------

    async def acquire(
        self, host: str, n: int, policy: HostPolicy, hold_s: float, holder: str | None = None
    ) -> Grant:
        """Take up to ``n`` request slots on ``host`` if politeness allows now.

        With a delay, at most one slot is granted per call and the host's window moves by
        the delay; without one, up to the free concurrency. While the job is paused
        (`crawlq.frontier.redis.jobs`), nothing is granted and the wait is `PAUSE_POLL_MS`.

        Args:
            host: Politeness key (`crawlq.request.CrawlRequest.host`).
            n: Slots wanted (>= 1).
            policy: The job's default politeness (a per-host override in Redis wins).
            hold_s: Seconds after which a slot that was never released is freed.
            holder: The runner (`start_task`) whose task takes the slots: they are freed as
                soon as its heartbeat is stale (`orphans`). None: only after ``hold_s``.
        """
        k = self.keys
        self._token_seq += 1
        prefix = f"{holder or self._token_prefix}|{self._token_seq}"
        args = [
            self.clock.wall_ms(), host, n, round(policy.delay_s * 1000), policy.concurrency,
            max(1, round(hold_s * 1000)), prefix, PAUSE_POLL_MS,
        ]  # fmt: skip
        granted, wait_ms = await self.script("acquire", [k.next, k.slots(host), k.policy], args)
        if granted:
            return Grant(tuple(f"{prefix}:{i}" for i in range(1, int(granted) + 1)), None)
        if int(wait_ms) == -2:
            return Grant((), None, down=True)
        return Grant((), None if int(wait_ms) < 0 else int(wait_ms) / 1000)

    async def release(self, host: str, tokens: Sequence[str]) -> None:
        """Give back slots of ``host`` (unknown or expired tokens are ignored)."""
        if tokens:
            await self.call(lambda: self.client.zrem(self.keys.slots(host), *tokens))

    # -- counters and live workers ------------------------------------------------------------

    async def counts(self) -> Counts:
        """The job's counters now (one round trip).

        Raises:
            JobGone: The job this state joined is gone or replaced: its counts mean nothing
                (an empty ``pending`` would look like a finished crawl).
        """
        k = self.keys

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hlen(k.pending)
                pipe.hmget(
                    k.stats, ["seen", "done", "dead", "delayed", "over_budget", "frontier_full"]
                )
                pipe.hget(k.job_info, "id")
                return await pipe.execute()

        pending, (seen, done, dead, delayed, over, full), job_id = await self.call(read)
        found = None if job_id is None else bytes(job_id).decode()
        if found != self.job_id:
            raise JobGone(self.job, self.job_id, found)
        return Counts(
            int(pending),
            int(seen or 0),
            int(done or 0),
            int(dead or 0),
            max(0, int(delayed or 0)),
            int(over or 0),
            int(full or 0),
        )

    async def run_counts(self) -> dict[str, int]:
        r"""The run counters the job's workers added at their settles (one ``HGETALL``).

        Returns:
            Field (without `RUN_PREFIX`: ``items``, ``dropped\n<reason>``, ...) -> count,
            every run of the job together; the caller takes the difference for one run.
        """
        got: dict[Any, Any] = await self.call(lambda: self.client.hgetall(self.keys.stats))
        out: dict[str, int] = {}
        for f, n in got.items():
            field = f.decode(errors="replace") if isinstance(f, bytes) else str(f)
            if field.startswith(RUN_PREFIX):
                out[field.removeprefix(RUN_PREFIX)] = int(n)
        return out

    async def live_workers(self, stale_s: float) -> int:
        """How many worker processes have run a task of this job in the last ``stale_s`` s.

        Counted from their heartbeats (`Heartbeat`), which a worker records once it runs one
        of the job's tasks: a worker that consumes another queue, or none, is not counted.
        """
        since_ms = self.clock.wall_ms() - int(stale_s * 1000)
        return int(await self.call(lambda: self.client.zcount(self.keys.workers, since_ms, "+inf")))
