"""What the Redis frontier reports about its job (``crawlq status``).

Counters, the busiest hosts, hosts in backoff, pages per second, retries and live workers,
gathered for status by `StatsMixin.job_status` (`crawlq.frontier.status.JobStatus`), which
also says whether the job is paused and, for a Celery-engine job, how many URLs are pending.

Counters are the ``stats`` hash that the scripts keep; pages per second come from the
``rate`` hash (acks per second, 120 one-second slots); workers from their heartbeats
(``workers``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from crawlq.errors import FrontierError, JobGone
from crawlq.frontier.redis.core import RedisCore
from crawlq.frontier.redis.refusals import read_refusals
from crawlq.frontier.redis.replies import reply_text
from crawlq.frontier.status import JobStatus, WorkerBeat
from crawlq.frontier.values import FrontierStats, HostBackoff, HostStats, backoff_state

__all__ = ["StatsMixin"]


class StatsMixin(RedisCore):
    """Counts and rates of the job."""

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

    async def stats(self) -> FrontierStats:
        """See `crawlq.frontier.base.Frontier.stats`."""
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

    async def pages_per_s(self, window_s: int = 60) -> float:
        """Acks per second over the last ``window_s`` seconds (at most 119), all workers.

        Over the seconds since the first ack in the window when that is shorter: a job that
        began acking 5 s ago shows its rate over those 5 s, not a twelfth of it.
        """
        now_s = self.clock.wall_ms() // 1000
        slots = await self._call(lambda: self.client.hgetall(self.keys.rate))
        total = 0
        first = now_s
        for value in slots.values():
            sec, count = (int(x) for x in value.split())
            if now_s - window_s < sec <= now_s:
                total += count
                first = min(first, sec)
        span = min(window_s, now_s - first + 1)
        return total / span

    async def retries_total(self) -> int:
        """Retries scheduled in the job so far, by every worker (both engines)."""
        value = await self._call(lambda: self.client.hget(self.keys.stats, "retries"))
        return int(value or 0)

    async def live_workers(self, within_s: float = 30.0) -> list[tuple[str, float]]:
        """Workers whose heartbeat is at most ``within_s`` old: (id, seconds since)."""
        now = self.clock.wall_ms()
        rows: list[Any] = await self._call(
            lambda: self.client.zrangebyscore(
                self.keys.workers, now - within_s * 1000, "+inf", withscores=True
            )
        )
        return [(bytes(w).decode(), (now - float(score)) / 1000) for w, score in rows]
