"""Which worker runs which URLs now, and taking back the URLs of dead workers (``orphans.lua``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crawlq.celery.runtime.state.core import StateCore
from crawlq.celery.runtime.state.entries import packed_fingerprints, pending_requests
from crawlq.request import CrawlRequest

__all__ = ["RunnersMixin"]


class RunnersMixin(StateCore):
    """Tasks' runners and dead workers' URLs."""

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
        await self._script("start_task", [k.running, k.workers], args)

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
        fps = [fp for runner in dead for fp in packed_fingerprints(running[runner])]
        values = await self._call(lambda: self.client.hmget(k.pending, fps)) if fps else []
        hosts = {r.host for r in pending_requests(values)}
        keys = [k.running, k.workers, k.pending, k.pending_at, *(k.slots(h) for h in hosts)]
        flat = await self._script("orphans", keys, [now, stale_ms])
        return pending_requests(flat[1::2])
