"""The work queue on Redis (`crawlq.frontier.queue.WorkQueue`): push, lease, renew, settle, stats.

Every multi-key step is one Lua script (the ``.lua`` files beside this module, keys in
`crawlq.frontier.redis.keys`). A lease is one pipelined read (expired leases, due retries,
ready hosts, inbox length) plus one script (``lease.lua``); it also requeues expired leases
and due retries of every worker (``requeue.lua``) and drains the inbox
(`crawlq.frontier.redis.inbox`), and waits as `crawlq.frontier.redis.idle` says. A push is
sent in chunks of `crawlq.frontier.redis.inbox.PUSH_CHUNK` requests, one ``push.lua`` call
each. A settle (ack, retry, dead, release: one ``settle.lua`` call) frees the host slot
unless ``lease.lua`` freed it already, and skips a lease that is no longer held (expired and
re-leased, or settled), which the return value reports.

Counters are the ``stats`` hash that the scripts keep (`RedisWorkQueue.stats`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from crawlq.errors import FrontierError, FrontierFull, JobGone
from crawlq.frontier.queue import (
    FrontierStats,
    HostBackoff,
    HostStats,
    Offer,
    backoff_state,
    check_lease_args,
    lease_with_wait,
)
from crawlq.frontier.redis.idle import RedisIdle
from crawlq.frontier.redis.inbox import PUSH_CHUNK, RedisInbox
from crawlq.frontier.redis.jobs import PAUSE_POLL_MS
from crawlq.frontier.redis.replies import reply_text
from crawlq.request import CrawlRequest, Lease

__all__ = ["RedisWorkQueue"]

logger = logging.getLogger(__name__)

_MAX_CANDIDATE_HOSTS = 512
_MAX_WAIT_S = 10.0
_RECOVER_EVERY_S = 30.0


class RedisWorkQueue(RedisInbox, RedisIdle):
    """Push, offer, lease, renew, the settles and stats of `crawlq.frontier.redis.RedisFrontier`."""

    async def push(self, requests: Sequence[CrawlRequest]) -> int:
        """See `crawlq.frontier.queue.WorkQueue.push`. Sent in chunks of 500 per script call."""
        added = 0
        for start in range(0, len(requests), PUSH_CHUNK):
            added += (await self._push(requests[start : start + PUSH_CHUNK], None)).queued
        return added

    async def offer(self, requests: Sequence[CrawlRequest]) -> Offer:
        """See `crawlq.frontier.queue.WorkQueue.offer`."""
        queued = refused = dropped = 0
        for start in range(0, len(requests), PUSH_CHUNK):
            got = await self._push(requests[start : start + PUSH_CHUNK], None, producer=True)
            queued, refused, dropped = (
                queued + got.queued,
                refused + got.refused,
                dropped + got.dropped,
            )
        return Offer(queued, refused, dropped)

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
        """See `crawlq.frontier.queue.WorkQueue.lease`.

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
            *k.host_keys(), source, k.owner, k.stats, k.reqs, *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        args = [now, mode, self.politeness.default.concurrency, len(hosts), *hosts, *body]
        return int(await self._script("requeue", keys, args))

    async def renew(
        self, leases: Sequence[Lease], visibility_timeout_s: float, worker_id: str | None = None
    ) -> list[Lease]:
        """See `crawlq.frontier.queue.WorkQueue.renew`.

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

    async def ack(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.queue.WorkQueue.ack`."""
        return await self._settle("ack", [(lease, "") for lease in leases])

    async def retry(self, lease: Lease, delay_s: float, reason: str) -> bool:
        """See `crawlq.frontier.queue.WorkQueue.retry`."""
        if delay_s < 0:
            raise ValueError(f"delay_s must not be negative, got {delay_s}")
        due_ms = self.clock.wall_ms() + round(delay_s * 1000)
        return await self._settle("retry", [(lease, f"{due_ms} {reason}")]) == 1

    async def dead(self, lease: Lease, reason: str) -> bool:
        """See `crawlq.frontier.queue.WorkQueue.dead`."""
        return await self._settle("dead", [(lease, reason)]) == 1

    async def release(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.queue.WorkQueue.release`."""
        return await self._settle("release", [(lease, "") for lease in leases])

    async def _settle(self, mode: str, items: Sequence[tuple[Lease, str]]) -> int:
        rows = [
            (lease.request.fingerprint, lease.lease_id, lease.request.host, extra)
            for lease, extra in items
        ]
        return await self._settle_rows(mode, rows)

    async def _settle_rows(self, mode: str, rows: Sequence[tuple[bytes, str, str, str]]) -> int:
        """Settle leases given as (fingerprint, lease id, host, extra) rows (`settle.lua`)."""
        if not rows:
            return 0
        k = self.keys
        hosts: dict[str, int] = {}
        body: list[Any] = []
        for fp, lease_id, host, extra in rows:
            body += [fp, lease_id, hosts.setdefault(host, len(hosts) + 1), extra]
        keys = [
            *k.host_keys(), k.leases, k.owner, k.stats, k.reqs, k.attempts,
            k.delayed, k.dead, k.rate, k.strikes, k.last_error, k.dead_at,
            *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        args = [self.clock.wall_ms(), mode, self.politeness.default.concurrency, len(hosts)]
        return int(await self._script("settle", keys, [*args, *hosts, *body]))

    async def stats(self) -> FrontierStats:
        """See `crawlq.frontier.queue.WorkQueue.stats`."""
        k = self.keys

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hgetall(k.stats)
                pipe.zrange(k.ready, 0, 199)
                pipe.hgetall(k.inflight)
                pipe.exists(k.job_info)
                pipe.hget(k.job_info, "id")
                return await pipe.execute()

        raw_counters, ready, inflight, exists, job_id = await self._call(read)
        found = None if job_id is None else reply_text(job_id)
        if self.job_id is not None and found != self.job_id:
            raise JobGone(self.job, self.job_id, found)
        if not exists:
            raise FrontierError(
                f"job {self.job!r} does not exist on this Redis: never seeded, deleted, or lost "
                "in a restart of a Redis without persistence"
            )
        counter = {key.decode(): int(value) for key, value in raw_counters.items()}
        hosts = list(dict.fromkeys([h.decode() for h in ready] + [h.decode() for h in inflight]))

        async def queue_lengths_and_next_times() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for host in hosts:
                    pipe.zcard(k.queue(host))
                    pipe.hget(k.next, host)
                return await pipe.execute()

        length_next = await self._call(queue_lengths_and_next_times) if hosts else []
        per_host = [
            HostStats(
                host,
                int(length_next[2 * i]),
                int(inflight.get(host.encode(), 0)),
                int(length_next[2 * i + 1] or 0),
            )
            for i, host in enumerate(hosts)
        ]
        per_host.sort(key=lambda h: (-h.queued, -h.in_flight))
        backoff = await self.backoff_hosts()
        return FrontierStats(
            queued=counter.get("queued", 0),
            in_flight=counter.get("inflight", 0),
            delayed=counter.get("delayed", 0),
            done=counter.get("done", 0),
            dead=counter.get("dead", 0),
            seen=counter.get("seen", 0),
            over_budget=counter.get("over_budget", 0),
            hosts=tuple(h for h in per_host[:20] if h.queued or h.in_flight),
            backoff=backoff,
        )

    async def backoff_hosts(self, limit: int = 20) -> tuple[HostBackoff, ...]:
        """Hosts in backoff (`FrontierStats.backoff`), also for a Celery-engine job."""
        k = self.keys
        strikes = await self._call(lambda: self.client.hgetall(k.strikes))
        counts: dict[str, list[int]] = {}
        for field_name, value in strikes.items():
            kind, _, host = reply_text(field_name).partition("\n")
            with contextlib.suppress(ValueError):
                pair = counts.setdefault(host, [0, 0])
                pair[0 if kind == "pushback" else 1] = int(value)
        hosts = [h for h, (p, f) in counts.items() if p > 0 or f > 0]
        if not hosts:
            return ()

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hmget(k.next, hosts)
                pipe.hmget(k.policy, hosts)
                return await pipe.execute()

        nexts, policies = await self._call(read)
        out = []
        for host, nxt, policy in zip(hosts, nexts, policies, strict=True):
            flags = reply_text(policy or b"").partition(" ")[2].partition(" ")[2]
            with contextlib.suppress(ValueError):
                pushbacks, failures = counts[host]
                out.append(
                    HostBackoff(host, pushbacks, failures, backoff_state(flags), int(nxt or 0))
                )
        out.sort(key=lambda b: -b.next_at_ms)
        return tuple(out[:limit])


def _leased_request(fp: bytes, host: str, value: bytes | None) -> tuple[CrawlRequest | None, str]:
    """The request a lease holds, or None and why its record cannot be one.

    The record (its queue score, a newline, the JSON request, in the job's ``reqs`` hash) must
    decode to a request of the fingerprint and host it was queued under: a record rewritten to
    another URL would be fetched, then settled under the wrong host (its own lease never ending).
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
