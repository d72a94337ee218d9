"""The job's record on Redis (`crawlq.frontier.job.JobRecord`): settings, engine mark, rates.

The job hash (``job``) holds the settings as JSON in the field ``settings`` (set once, by the
first process that proposes them, ``job_settings.lua``) and the field ``engine`` names the
Celery engine when it runs the job. What the job reports beside its queue counts (``crawlq
status``) is read here too: pages per second from the ``rate`` hash (acks per second, 120
one-second slots), retries from the ``stats`` hash, live workers from their heartbeats
(``workers``).
"""

from __future__ import annotations

import json
from typing import Any

from crawlq.errors import ConfigError
from crawlq.frontier.redis.client import RedisClient

__all__ = ["RedisJobRecord"]


class RedisJobRecord(RedisClient):
    """The job hash's settings and engine fields, and the job's rates and live workers."""

    async def job_settings(self, proposed: dict[str, Any] | None) -> dict[str, Any] | None:
        """See `crawlq.frontier.job.JobRecord.job_settings`."""
        k = self.keys
        if proposed is not None:
            text = json.dumps(proposed, sort_keys=True)
            stored = await self._script("job_settings", [], [text])
        else:
            stored = await self._call(lambda: self.client.hget(k.job_info, "settings"))
        if stored is None:
            return None
        try:  # shared state: whoever can write the key may have written anything
            value = json.loads(stored)
            if not isinstance(value, dict):
                raise ValueError(f"a JSON object is expected, not {type(value).__name__}")
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise ConfigError(
                "job",
                f"job {self.job!r}'s settings in Redis are unreadable ({exc}); seed the job "
                "again with its settings or use another --job",
            ) from None
        return dict(value)

    async def job_engine(self) -> str:
        """The engine that runs the job: ``celery`` or ``native``.

        ``celery`` when a Celery engine marked it (the job hash's ``engine`` field, see
        `crawlq.celery.runtime.state`).
        """
        engine = await self._call(lambda: self.client.hget(self.keys.job_info, "engine"))
        return "celery" if engine == b"celery" else "native"

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
