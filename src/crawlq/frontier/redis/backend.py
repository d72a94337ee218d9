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

Errors: every Redis error goes through `crawlq.frontier.redis.errors.call`.

Layout: this module holds `RedisFrontier` itself (opening and joining a job, the lease loop,
renewal, dropping a job); each other part is a mixin over `crawlq.frontier.redis.core.RedisCore`
in a module of its own: `push`, `inbox`, `idle` (the wait), `settle`, `hosts` (policy and
strikes), `job_settings`, `url_state` (inspect), `dead_letters`, `robots`, `stats`,
`item_keys`; Bloom dedup is `crawlq.frontier.redis.bloom`.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis

from crawlq.clock import Clock
from crawlq.errors import ConfigError, FrontierFull
from crawlq.frontier.lease_wait import check_lease_args, lease_with_wait
from crawlq.frontier.redis.bloom import BloomDedup
from crawlq.frontier.redis.dead_letters import DeadLettersMixin
from crawlq.frontier.redis.hosts import HostsMixin
from crawlq.frontier.redis.idle import IdleMixin
from crawlq.frontier.redis.inbox import InboxMixin
from crawlq.frontier.redis.item_keys import ItemKeysMixin
from crawlq.frontier.redis.job_settings import JobSettingsMixin
from crawlq.frontier.redis.jobs import PAUSE_POLL_MS
from crawlq.frontier.redis.keys import Keyspace
from crawlq.frontier.redis.proxies import ProxiesMixin
from crawlq.frontier.redis.replies import reply_text
from crawlq.frontier.redis.robots import RobotsMixin
from crawlq.frontier.redis.settle import SettleMixin
from crawlq.frontier.redis.stats import StatsMixin
from crawlq.frontier.redis.url_state import UrlStateMixin
from crawlq.request import CrawlRequest, Lease
from crawlq.rules.politeness import HostPolicy, Politeness
from crawlq.rules.politeness import rules_with_default as _rules

__all__ = ["RedisFrontier"]

logger = logging.getLogger(__name__)

_MAX_CANDIDATE_HOSTS = 512
_MAX_WAIT_S = 10.0
_RECOVER_EVERY_S = 30.0


class RedisFrontier(
    InboxMixin,
    IdleMixin,
    SettleMixin,
    HostsMixin,
    ProxiesMixin,
    JobSettingsMixin,
    UrlStateMixin,
    DeadLettersMixin,
    RobotsMixin,
    ItemKeysMixin,
    StatsMixin,
):
    """`crawlq.frontier.base.Frontier` on Redis, shared by every worker of a job.

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
    ) -> RedisFrontier:
        """Connect to ``url`` (``redis://[:password@]host:port/db`` or ``rediss://``).

        The job's dedup mode is fixed when the job is created (``create``, by its first seed
        or crawl, which also gives it its random id); everyone else adopts it, and joins the
        job's id: writes check it (module docstring). Opening does not write anything unless
        ``create`` is set (or the job exists without an id: it gets one), so a worker or a
        status query of a job that was never seeded leaves no trace.

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
        if parts.scheme in ("redis", "rediss") and (not hostname or (not db.isdigit() and db)):
            raise ConfigError("frontier", f"bad Redis URL {url!r}: want redis://host:port/DB")
        try:
            client = Redis.from_url(url, decode_responses=False, health_check_interval=10)
            keys = Keyspace(job)
        except ValueError as exc:
            raise ConfigError("frontier", f"bad Redis URL or job {url!r} {job!r}: {exc}") from exc
        self = cls(client, job, _rules(politeness, default_policy), clock, bloom)
        self.keys = keys
        try:
            wanted = (bloom.spec() if bloom else "set").encode()
            try:
                self.job_id, actual = await self._join(create, wanted)
            except TypeError as exc:  # redis-py: an unknown ?option= of the URL
                raise ConfigError("frontier", f"bad Redis URL {url!r}: {exc}") from None
            if actual is not None and actual != wanted:
                have = actual.decode() if isinstance(actual, bytes) else str(actual)
                if bloom is not None or not have.startswith("bloom "):
                    raise ConfigError(
                        "bloom", f"job {job!r} dedups with {have}, not {wanted.decode()}"
                    )
                _, capacity, rate = have.split()
                self.bloom = BloomDedup(int(capacity), float(rate))  # adopt the job's mode
        except BaseException:
            await client.aclose()
            raise
        return self

    async def _join(self, create: bool, dedup: bytes) -> tuple[str | None, bytes | None]:
        """Read the job's id and dedup mode (``job_open.lua``), creating the job if asked."""
        args = ["1" if create else "0", secrets.token_hex(8), dedup]
        job_id, actual = await self._script("job_open", [self.keys.job_info], args)
        return (None if job_id is None else reply_text(job_id)), actual

    # -- lease ----------------------------------------------------------------------------

    async def lease(
        self,
        n: int,
        worker_id: str,
        visibility_timeout_s: float,
        wait_s: float = 0.0,
        *,
        until_drained: bool = False,
        fetched: Sequence[Lease] = (),
    ) -> list[Lease]:
        """See `crawlq.frontier.base.Frontier.lease`.

        Also requeues expired leases and due retries of every worker, and drains the inbox.
        """
        vt_ms = check_lease_args(n, visibility_timeout_s)

        async def try_lease(done: Sequence[Lease]) -> tuple[list[Lease], int | None]:
            return await self._lease_once(n, worker_id, vt_ms, done)

        async def sleep(timeout_s: float, pending: bool) -> None:
            await self._wait(worker_id, timeout_s, pending=pending)

        return await lease_with_wait(
            try_lease,
            sleep,
            self.clock,
            wait_s=wait_s,
            until_drained=until_drained,
            fetched=fetched,
            max_sleep_s=_MAX_WAIT_S,
        )

    async def _lease_once(
        self, n: int, worker_id: str, vt_ms: int, fetched: Sequence[Lease]
    ) -> tuple[list[Lease], int | None]:
        k = self.keys
        now = self.clock.wall_ms()
        n_hosts = min(_MAX_CANDIDATE_HOSTS, max(64, 2 * n))

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.zrangebyscore(k.leases, "-inf", now, start=0, num=256)
                pipe.zrangebyscore(k.delayed, "-inf", now, start=0, num=256)
                pipe.llen(k.inbox)
                pipe.zrangebyscore(k.ready, "-inf", now, start=0, num=n_hosts)
                return await pipe.execute()

        expired, due_retries, inbox_len, ready = await self._call(read)
        if expired or due_retries or inbox_len or worker_id in self._claim_pending:
            if expired:
                moved = await self._requeue("reap", k.leases, expired, now)
                if moved:
                    logger.warning("requeued %d expired leases of dead or stalled workers", moved)
            if due_retries:
                await self._requeue("promote", k.delayed, due_retries, now)
            if inbox_len or worker_id in self._claim_pending:
                await self._drain_unless_full(worker_id)
            ready = await self._call(
                lambda: self.client.zrangebyscore(k.ready, "-inf", now, start=0, num=n_hosts)
            )
        if ready or fetched:
            leases = await self._lease_script(n, worker_id, vt_ms, now, ready, fetched)
            if leases:
                return leases, None
            if self.paused:  # look again after a while (resume also wakes idle workers)
                return [], now + PAUSE_POLL_MS
        return [], await self._next_wake_ms()

    async def _drain_unless_full(self, worker_id: str) -> None:
        """Drain the inbox; on a Redis at its ``maxmemory`` leave the entries waiting.

        A worker keeps draining the queue while Redis is full (`crawlq.frontier.redis.scripts`):
        the entries wait in the inbox, or in the worker's claim list when the push of a drain
        was refused (the next lease drains that claim first), until Redis has room (logged
        once per `FULL_LOG_EVERY_S`).
        """
        try:
            await self.drain_inbox(worker_id)
        except FrontierFull:
            self.full = True
            self._claim_pending.add(worker_id)
            if self._full_log.due():
                logger.warning(
                    "job %s: Redis is full (at its maxmemory): inbox entries wait there until"
                    " it has room",
                    self.job,
                )
            return
        if self.full:
            self.full = False
            self._full_log.reset()

    async def _lease_script(
        self,
        n: int,
        worker_id: str,
        vt_ms: int,
        now: int,
        ready: list[bytes],
        fetched: Sequence[Lease],
    ) -> list[Lease]:
        k = self.keys
        index = {h.decode(): i for i, h in enumerate(ready, 1)}
        done: list[Any] = []
        for lease in fetched:  # their hosts join the candidates: a freed slot may open one
            host = lease.request.host
            done += [
                lease.request.fingerprint,
                lease.lease_id,
                index.setdefault(host, len(index) + 1),
            ]
        hosts = list(index)
        ddelay, dconc = self._policy_args()
        keys = [
            *k.host_keys(), k.reqs, k.attempts, k.leases, k.owner, k.stats,
            *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        args = [now, n, vt_ms, worker_id, ddelay, dconc, len(hosts), *hosts, len(fetched), *done]
        flat = await self._script("lease", keys, args)
        paused = flat == [b"paused"]
        if paused != self.paused:
            self.paused = paused
            if paused:
                logger.warning(
                    "job %s is paused: leasing nothing until `crawlq job resume %s`",
                    self.job,
                    self.job,
                )
            else:
                logger.warning("job %s resumed", self.job)
        if paused:
            return []
        leases = []
        corrupt: list[tuple[bytes, str, str, str]] = []
        for i in range(0, len(flat), 6):
            fp, lease_id, attempt, value, down, host = flat[i : i + 6]
            request, problem = _leased_request(fp, host.decode(), value)
            if request is None:  # shared state anyone with Redis access can write
                logger.error(
                    "the job's record of request %s is corrupt (%s): dead-lettered as"
                    " corrupt_request",
                    fp.hex(),
                    problem,
                )
                corrupt.append(
                    (fp, lease_id.decode(), host.decode(), f"corrupt_request: {problem}")
                )
                continue
            leases.append(
                Lease(
                    lease_id=lease_id.decode(),
                    request=request,
                    attempt=int(attempt),
                    worker_id=worker_id,
                    deadline_ms=now + vt_ms,
                    host_down=down == b"1",
                )
            )
        await self._settle_rows("dead", corrupt)
        return leases

    async def _requeue(self, mode: str, source: str, members: list[bytes], now: int) -> int:
        k = self.keys
        hosts: dict[str, int] = {}
        body: list[Any] = []
        for member in members:
            host = member[20:].decode()
            body += [member, hosts.setdefault(host, len(hosts) + 1)]
        keys = [
            *k.host_keys(), source, k.owner, k.stats, k.scores, *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        args = [now, mode, self.politeness.default.concurrency, len(hosts), *hosts, *body]
        return int(await self._script("requeue", keys, args))

    async def renew(
        self, leases: Sequence[Lease], visibility_timeout_s: float, worker_id: str | None = None
    ) -> list[Lease]:
        """See `crawlq.frontier.base.Frontier.renew`.

        Also records the worker's heartbeat (``workers``) and, every 30 s, returns dead
        workers' inbox claims to the inbox.
        """
        k = self.keys
        now = self.clock.wall_ms()
        deadline = now + round(visibility_timeout_s * 1000)
        who = worker_id or (leases[0].worker_id if leases else "-")
        args: list[Any] = [deadline, who, now]
        for lease in leases:
            fp = lease.request.fingerprint
            args += [fp + lease.request.host.encode(), fp, lease.lease_id]
        flags = await self._script("renew", [k.leases, k.owner, k.workers], args)
        if who != "-":
            self._heartbeats.add(who)
        if time.monotonic() - self._last_recover > _RECOVER_EVERY_S:
            self._last_recover = time.monotonic()
            await self._recover_claims(now)
        return [
            Lease(lease.lease_id, lease.request, lease.attempt, lease.worker_id, deadline)
            for lease, ok in zip(leases, flags, strict=True)
            if ok
        ]

    async def drop(self) -> int:
        """Delete every key of the job (the crawl's frontier, not its store). Returns keys."""

        async def drop_all() -> int:
            deleted = 0
            async for key in self.client.scan_iter(match=self.keys.pattern(), count=1000):
                deleted += int(await self.client.unlink(key))
            return deleted

        return await self._call(drop_all)


def _leased_request(fp: bytes, host: str, value: bytes | None) -> tuple[CrawlRequest | None, str]:
    """The request a lease holds, or None and why its record cannot be one.

    The record (the host, a newline, the JSON request, in the job's ``reqs`` hash) must decode to a
    request of the fingerprint and host it was queued under: a record rewritten to another
    URL would be fetched, then settled under the wrong host (its own lease never ending).
    """
    if value is None:
        return None, "no record"
    _, _, text = value.partition(b"\n")
    try:
        request = CrawlRequest.from_json(text)
    except ValueError as exc:  # includes json.JSONDecodeError and UnicodeDecodeError
        return None, str(exc)[:200]
    if request.fingerprint != fp or request.host != host:
        return None, f"a request of another URL ({request.url[:200]})"
    return request, ""
