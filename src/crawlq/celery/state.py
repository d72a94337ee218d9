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
* **Done**: the crawl is finished when ``pending`` is empty: every admitted URL has a stored
  outcome (page, filtered or dead letter).
* **Politeness** (``acquire``): a host's next-allowed time and its held slots (each with a
  hold deadline, so that a killed worker's slot comes back) move in one step for all workers.
* **Dead workers** (``orphans``): each worker process records a heartbeat in ``workers``
  (`Heartbeat`, a thread of its own, every ``heartbeat_s``), and each task the fingerprints
  it runs in ``running`` (`CeleryState.start_task`). When a worker's heartbeat is stale, the
  URLs it was running and that are still pending are taken in one step, and the caller sends
  them again: a killed worker's URLs need not wait for the broker's visibility timeout.
* **Dead letters** (``settle``, ``replay``): a dead-lettered URL's request is kept in
  ``dead_requests`` (its reason and detail are in the store), so that ``crawlq dead replay``
  can make it pending again and send it as it was (`CeleryState.replay`).
* **Inspection** (``inspect``): one read of a URL's pending entry, due time and the runner
  whose task holds it (`CeleryState.inspect`).
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

This is the only module of the Celery engine that imports redis.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import redis as sync_redis
from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlq.clock import Clock, SystemClock
from crawlq.errors import ConfigError, JobGone
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.frontier.redis.errors import call
from crawlq.frontier.redis.jobs import PAUSE_POLL_MS
from crawlq.frontier.redis.scripts import SCRIPTS as FRONTIER_SCRIPTS
from crawlq.frontier.redis.scripts import Script
from crawlq.politeness import HostPolicy, Politeness
from crawlq.request import CrawlRequest
from crawlq.settings import check_job_name

__all__ = [
    "ENGINE_FIELD",
    "CeleryState",
    "Counts",
    "Grant",
    "Heartbeat",
    "TaskState",
    "process_id",
]

logger = logging.getLogger(__name__)

ENGINE_FIELD = "engine"
"""Field of the job's ``job`` hash naming the engine that runs it: ``celery`` when set
(`CeleryState.admit`); ``crawlq.cli.status_cmd`` reads it (and spells it again: importing
this package imports celery)."""

_T = TypeVar("_T")
_SCRIPTS = {
    name: Script(name, "crawlq.celery")
    for name in ("admit", "settle", "acquire", "orphans", "inspect", "replay")
}


def process_id() -> str:
    """This worker process as its heartbeat names it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Grant:
    """The answer of `CeleryState.acquire`.

    Attributes:
        tokens: Slot tokens granted (release each with `CeleryState.release`); empty when
            the host is not ready.
        wait_s: When nothing was granted: seconds until the host's window opens, or None
            when its concurrency is used up (the caller polls).
        down: The host's circuit breaker gave up on it: dead-letter its URLs as
            ``host_unreachable`` without a request (`crawlq.politeness`).
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
    """

    pending: int
    seen: int
    done: int
    dead: int
    delayed: int
    over_budget: int = 0


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


class CeleryState:
    """One job's Celery-engine state on one Redis connection (used from one event loop).

    Args:
        client: A ``redis.asyncio.Redis`` with ``decode_responses=False``.
        job: The job name.
        clock: Source of "now" (Unix ms), passed to the scripts.
        job_id: The job's id (`open` reads it); None: no job joined, every write fails.
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
    async def open(cls, url: str, job: str, *, expect_id: str | None = None) -> CeleryState:
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
        return await self._call(lambda: _SCRIPTS[name].run(self.client, keys, args, job))

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
        flags = await self._script("admit", keys, args)
        if not self._marked:  # once per instance (after the job check): a Celery-engine job
            await self._call(lambda: self.client.hsetnx(k.job_info, ENGINE_FIELD, "celery"))
            self._marked = True
        return [bool(x) for x in flags]

    async def settle(
        self, done: Sequence[bytes], dead: Sequence[bytes], answered: Sequence[str] = ()
    ) -> int:
        """Take URLs whose outcome is stored out of ``pending`` (idempotent).

        Args:
            done: Fingerprints stored as a page or filtered record.
            dead: Fingerprints dead-lettered.
            answered: Hosts that answered a request: their strikes in a row and breaker flags
                are cleared, as an ack does in the native frontier.

        Returns:
            How many were still pending.
        """
        if not done and not dead and not answered:
            return 0
        k = self.keys
        args = [len(done), len(answered), *answered, *done, *dead]
        keys = [k.pending, k.pending_at, k.stats, k.strikes, k.policy, k.dead_requests]
        return int(await self._script("settle", keys, args))

    async def inspect(self, fingerprint: bytes) -> TaskState:
        """Read one URL's state in one step (``inspect.lua``); writes nothing.

        Raises:
            JobGone: The job this state joined is gone or replaced.
            FrontierUnavailable: Redis does not answer.
        """
        k = self.keys
        fp = bytes(fingerprint)
        keys = [k.job_info, k.seen, k.pending, k.pending_at, k.running, k.workers, k.dead_requests]
        got = await self._call(lambda: _SCRIPTS["inspect"].run(self.client, keys, [fp]))
        job_id, seen, pending, due_ms, runner, beat, dead = got
        found = None if job_id is None else bytes(job_id).decode(errors="replace")
        if found != self.job_id:
            raise JobGone(self.job, self.job_id, found)
        value = pending if pending is not None else dead
        owner, request = _owner_and_request(value)
        if pending is not None:
            if runner is not None:
                return TaskState(
                    fp, "running", request, owner, _ms(due_ms), _text(runner), _ms(beat)
                )
            return TaskState(fp, "pending", request, owner, _ms(due_ms))
        if int(seen):
            return TaskState(fp, "settled", request, owner)
        return TaskState(fp, "unseen")

    async def dead_requests(self, fingerprints: Sequence[bytes]) -> dict[bytes, CrawlRequest]:
        """The kept requests of dead-lettered URLs (those that decode), by fingerprint."""
        fps = list(fingerprints)
        if not fps:
            return {}
        values = await self._call(lambda: self.client.hmget(self.keys.dead_requests, fps))
        out = {}
        for fp, value in zip(fps, values, strict=True):
            request = _owner_and_request(value)[1]
            if request is not None:
                out[bytes(fp)] = request
        return out

    async def pending_of(self, fingerprints: Sequence[bytes]) -> set[bytes]:
        """Which of ``fingerprints`` are pending now (admitted and not settled)."""
        fps = list(fingerprints)
        if not fps:
            return set()
        pipe_result = await self._call(lambda: self._exists_many(self.keys.pending, fps))
        return {bytes(fp) for fp, there in zip(fps, pipe_result, strict=True) if there}

    async def _exists_many(self, key: str, fields: list[bytes]) -> list[Any]:
        async with self.client.pipeline(transaction=False) as pipe:
            for name in fields:
                pipe.hexists(key, name)
            return list(await pipe.execute())

    async def replay(self, requests: Sequence[CrawlRequest]) -> list[bool]:
        """Make dead-lettered URLs pending again, due now (``replay.lua``).

        The admit step of ``crawlq dead replay``: the caller then sends a task for each one
        returned True.

        A URL is made pending only when the job admitted it once and it is not pending now,
        so two replays at once send it once, and its count moves from dead to pending.

        Returns:
            One bool per request.
        """
        if not requests:
            return []
        k = self.keys
        args: list[Any] = [self.clock.wall_ms()]
        for request in requests:
            args += [request.fingerprint, request.to_json()]
        keys = [k.seen, k.pending, k.pending_at, k.stats, k.dead_requests]
        return [bool(x) for x in await self._script("replay", keys, args)]

    async def reschedule(self, fingerprints: Sequence[bytes], delay_s: float) -> None:
        """Record that pending URLs were sent with a countdown: they run in ``delay_s`` s.

        Their due time (``pending_at``, Unix ms) moves to now + ``delay_s``.
        """
        if fingerprints:
            due_ms = self.clock.wall_ms() + round(delay_s * 1000)
            mapping: Mapping[Any, Any] = dict.fromkeys(fingerprints, due_ms)
            await self._call(lambda: self.client.zadd(self.keys.pending_at, mapping, xx=True))

    due = reschedule
    """The former name of `reschedule` (``celery/crawl.py`` and ``celery/runtime.py`` call it
    by that name until they are renamed)."""

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
        found = await self._call(
            lambda: self.client.zrangebyscore(k.pending_at, "-inf", before, start=0, num=limit)
        )
        fps: list[bytes] = [fp for fp in found if isinstance(fp, bytes)]
        if fps:  # a URL that a live worker runs now is late, not lost
            running = await self._call(lambda: self.client.hvals(k.running))
            busy = {
                fp
                for packed in running
                if isinstance(packed, bytes)
                for fp in _fingerprints(packed)
            }
            fps = [fp for fp in fps if fp not in busy]
        if not fps:
            return []
        values = await self._call(lambda: self.client.hmget(k.pending, fps))
        out = []
        for value in values:
            if value is not None:
                with contextlib.suppress(ValueError, IndexError):
                    raw = value.encode() if isinstance(value, str) else value
                    out.append(CrawlRequest.from_json(raw.split(b"\n", 1)[1]))
        return out

    async def start_task(self, runner: str, fingerprints: Sequence[bytes]) -> None:
        """Record that ``runner`` runs these URLs now, with a heartbeat of its process.

        Args:
            runner: ``process_id()`` and ``":"`` and the thread: one task at a time.
            fingerprints: The URLs its task is about to run (replacing its earlier task's).
        """
        k = self.keys
        process = runner.rpartition(":")[0]

        async def write() -> None:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.zadd(k.workers, {process: self.clock.wall_ms()})
                pipe.hset(k.running, runner, b"".join(fingerprints))
                await pipe.execute()

        await self._call(write)

    async def end_task(self, runner: str) -> None:
        """``runner``'s task is over: its URLs are settled or sent again as new tasks."""
        await self._call(lambda: self.client.hdel(self.keys.running, runner))

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
        got = await self._call(lambda: self.client.hgetall(k.running))
        running = {
            r: fps for r, fps in got.items() if isinstance(r, bytes) and isinstance(fps, bytes)
        }
        if not running:
            return []
        runners = list(running)
        processes: list[Any] = [r.rpartition(b":")[0] for r in runners]
        beats = await self._call(lambda: self.client.zmscore(k.workers, processes))
        dead = [
            runner
            for runner, beat in zip(runners, beats, strict=True)
            if beat is None or beat < now - stale_ms
        ]
        if not dead:
            return []
        self.dead_workers += len(dead)
        fps = [fp for runner in dead for fp in _fingerprints(running[runner])]
        values = await self._call(lambda: self.client.hmget(k.pending, fps)) if fps else []
        hosts = {r.host for r in _requests(values)}
        keys = [k.running, k.workers, k.pending, k.pending_at, *(k.slots(h) for h in hosts)]
        flat = await self._script("orphans", keys, [now, stale_ms])
        return _requests(flat[1::2])

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
        granted, wait_ms = await self._script("acquire", [k.next, k.slots(host), k.policy], args)
        if granted:
            return Grant(tuple(f"{prefix}:{i}" for i in range(1, int(granted) + 1)), None)
        if int(wait_ms) == -2:
            return Grant((), None, down=True)
        return Grant((), None if int(wait_ms) < 0 else int(wait_ms) / 1000)

    async def release(self, host: str, tokens: Sequence[str]) -> None:
        """Give back slots of ``host`` (unknown or expired tokens are ignored)."""
        if tokens:
            await self._call(lambda: self.client.zrem(self.keys.slots(host), *tokens))

    async def add_delayed(self, n: int) -> None:
        """Count ``n`` retries scheduled (negative: started)."""
        if n < 0:
            await self._call(lambda: self.client.hincrby(self.keys.stats, "delayed", n))
        elif n > 0:  # also the job's count of retries ever scheduled (`crawlq dashboard`)

            async def both() -> None:
                async with self.client.pipeline(transaction=False) as pipe:
                    pipe.hincrby(self.keys.stats, "delayed", n)
                    pipe.hincrby(self.keys.stats, "retries", n)
                    await pipe.execute()

            await self._call(both)

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
                pipe.hmget(k.stats, ["seen", "done", "dead", "delayed", "over_budget"])
                pipe.hget(k.job_info, "id")
                return await pipe.execute()

        pending, (seen, done, dead, delayed, over), job_id = await self._call(read)
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
        )

    async def live_workers(self, stale_s: float) -> int:
        """How many worker processes have run a task of this job in the last ``stale_s`` s.

        Counted from their heartbeats (`Heartbeat`), which a worker records once it runs one
        of the job's tasks: a worker that consumes another queue, or none, is not counted.
        """
        since_ms = self.clock.wall_ms() - int(stale_s * 1000)
        return int(
            await self._call(lambda: self.client.zcount(self.keys.workers, since_ms, "+inf"))
        )

    async def close(self) -> None:
        """Close the connection pool."""
        with contextlib.suppress(RedisError, OSError):
            await self.client.aclose()


def _owner_and_request(value: Any) -> tuple[str | None, CrawlRequest | None]:
    r"""The owner and request of a ``pending`` value (``owner "\n" request JSON``), leniently."""
    if value is None:
        return None, None
    raw = value.encode() if isinstance(value, str) else bytes(value)
    owner, _, text = raw.partition(b"\n")
    try:
        return _text(owner), CrawlRequest.from_json(text)
    except ValueError:  # shared state: whoever can write the key may write anything
        return _text(owner), None


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _ms(value: Any) -> int | None:
    try:
        return None if value is None else round(float(value))
    except (TypeError, ValueError, OverflowError):
        return None


def _fingerprints(packed: bytes) -> list[bytes]:
    """The 20-byte fingerprints of a ``running`` entry."""
    return [packed[i : i + 20] for i in range(0, len(packed) - 19, 20)]


def _requests(values: Sequence[Any]) -> list[CrawlRequest]:
    r"""The requests of ``pending`` values (``owner "\n" request JSON``); others skipped."""
    out = []
    for value in values:
        with contextlib.suppress(ValueError, IndexError, TypeError, AttributeError):
            raw = value.encode() if isinstance(value, str) else value
            out.append(CrawlRequest.from_json(raw.split(b"\n", 1)[1]))
    return out


class Heartbeat:
    """A daemon thread that records this worker process's heartbeat in its jobs' Redis.

    One per process (`Heartbeat.of_process`): it beats every job added to it every
    ``interval_s`` seconds, also while the process's tasks download (the thread runs beside
    them), so a stale heartbeat means a dead process (`CeleryState.orphans`). A failed beat
    (Redis restarting) is logged at debug level and the beats go on.

    Args:
        interval_s: Seconds between two beats.
    """

    _of_this_process: Heartbeat | None = None
    """The process's one heartbeat thread (`of_process`); None before the first use."""
    _lock = threading.Lock()

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.pid = os.getpid()
        self._jobs: dict[tuple[str, str], sync_redis.Redis] = {}
        self._jobs_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="crawlq-heartbeat", daemon=True)
        self._thread.start()

    @classmethod
    def of_process(cls, interval_s: float) -> Heartbeat:
        """This process's heartbeat thread, started on first use (after a fork too)."""
        with cls._lock:
            beat = cls._of_this_process
            if beat is None or beat.pid != os.getpid():  # none yet, or the parent's (a fork)
                beat = cls._of_this_process = cls(interval_s)
            beat.interval_s = min(beat.interval_s, interval_s)
            return beat

    def add(self, url: str, job: str) -> None:
        """Beat for ``job`` on the Redis at ``url`` too (at once, then every interval)."""
        with self._jobs_lock:
            if (url, job) in self._jobs:
                return
            client = sync_redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
            self._jobs[(url, job)] = client
        self._beat({(url, job): client})

    def stop(self) -> None:
        """Stop beating and close the connections."""
        self._stop.set()
        with self._jobs_lock:
            jobs, self._jobs = self._jobs, {}
        for client in jobs.values():
            with contextlib.suppress(sync_redis.RedisError, OSError):
                client.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._jobs_lock:
                jobs = dict(self._jobs)
            self._beat(jobs)

    def _beat(self, jobs: Mapping[tuple[str, str], sync_redis.Redis]) -> None:
        member = process_id()
        for (_url, job), client in jobs.items():
            try:
                now = SystemClock().wall_ms()
                client.zadd(Keyspace(job).workers, {member: now})
            except (sync_redis.RedisError, OSError) as exc:
                logger.debug("heartbeat of %s for job %s failed: %s", member, job, exc)
