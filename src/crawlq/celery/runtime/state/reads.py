"""Read-only views of a Celery-engine job: its counters, live workers and one URL's state."""

from __future__ import annotations

from typing import Any

from crawlq.celery.runtime.state.core import SCRIPTS, StateCore
from crawlq.celery.runtime.state.entries import owner_and_request
from crawlq.celery.runtime.state.values import RUN_PREFIX, Counts, TaskState
from crawlq.errors import JobGone
from crawlq.frontier.redis.replies import reply_int, reply_text

__all__ = ["ReadsMixin"]


class ReadsMixin(StateCore):
    """Counts, live workers and one URL."""

    async def inspect(self, fingerprint: bytes) -> TaskState:
        """Read one URL's state in one step (``inspect.lua``); writes nothing.

        Raises:
            JobGone: The job this state joined is gone or replaced.
            FrontierUnavailable: Redis does not answer.
        """
        k = self.keys
        fp = bytes(fingerprint)
        keys = [k.job_info, k.seen, k.pending, k.pending_at, k.running, k.workers, k.dead_requests]
        got = await self._call(lambda: SCRIPTS["inspect"].run(self.client, keys, [fp]))
        job_id, seen, pending, due_ms, runner, beat, dead = got
        found = None if job_id is None else bytes(job_id).decode(errors="replace")
        if found != self.job_id:
            raise JobGone(self.job, self.job_id, found)
        value = pending if pending is not None else dead
        owner, request = owner_and_request(value)
        if pending is not None:
            if runner is not None:
                return TaskState(
                    fp,
                    "running",
                    request,
                    owner,
                    reply_int(due_ms),
                    reply_text(runner),
                    reply_int(beat),
                )
            return TaskState(fp, "pending", request, owner, reply_int(due_ms))
        if int(seen):
            return TaskState(fp, "settled", request, owner)
        return TaskState(fp, "unseen")

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

        pending, (seen, done, dead, delayed, over, full), job_id = await self._call(read)
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
        got: dict[Any, Any] = await self._call(lambda: self.client.hgetall(self.keys.stats))
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
        return int(
            await self._call(lambda: self.client.zcount(self.keys.workers, since_ms, "+inf"))
        )
