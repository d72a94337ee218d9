"""The operator's side of a Celery-engine job in Redis: one URL's state, dead letters, replays.

What ``crawlq inspect`` and ``crawlq dead list|replay`` read and write for a job of the Celery
engine (`crawlq.celery.operate`): one URL's pending entry, due time and the runner whose task
holds it (``inspect.lua``, one read), which URLs are pending now, the requests kept for
dead-lettered URLs (``dead_requests``), and making dead-lettered URLs pending again
(``replay.lua``). A narrow part over the job's `crawlq.celery.runtime.state.CeleryState`: its
connection, job id and error translation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crawlq.celery.runtime.state import SCRIPTS, CeleryState
from crawlq.celery.runtime.state_values import TaskState, owner_and_request
from crawlq.errors import JobGone
from crawlq.frontier.redis.replies import reply_int, reply_text
from crawlq.request import CrawlRequest

__all__ = ["Inspection"]


class Inspection:
    """One URL's state, dead letters and replays of the job that ``state`` joined.

    Args:
        state: The job's state in Redis.
    """

    def __init__(self, state: CeleryState) -> None:
        self.state = state

    async def inspect(self, fingerprint: bytes) -> TaskState:
        """Read one URL's state in one step (``inspect.lua``); writes nothing.

        Raises:
            JobGone: The job the state joined is gone or replaced.
            FrontierUnavailable: Redis does not answer.
        """
        k = self.state.keys
        fp = bytes(fingerprint)
        keys = [k.job_info, k.seen, k.pending, k.pending_at, k.running, k.workers, k.dead_requests]
        got = await self.state.call(lambda: SCRIPTS["inspect"].run(self.state.client, keys, [fp]))
        job_id, seen, pending, due_ms, runner, beat, dead = got
        found = None if job_id is None else bytes(job_id).decode(errors="replace")
        if found != self.state.job_id:
            raise JobGone(self.state.job, self.state.job_id, found)
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

    async def dead_requests(self, fingerprints: Sequence[bytes]) -> dict[bytes, CrawlRequest]:
        """The kept requests of dead-lettered URLs (those that decode), by fingerprint."""
        fps = list(fingerprints)
        if not fps:
            return {}
        values = await self.state.call(
            lambda: self.state.client.hmget(self.state.keys.dead_requests, fps)
        )
        out = {}
        for fp, value in zip(fps, values, strict=True):
            request = owner_and_request(value)[1]
            if request is not None:
                out[bytes(fp)] = request
        return out

    async def pending_of(self, fingerprints: Sequence[bytes]) -> set[bytes]:
        """Which of ``fingerprints`` are pending now (admitted and not settled)."""
        fps = list(fingerprints)
        if not fps:
            return set()
        pipe_result = await self.state.call(lambda: self._exists_many(self.state.keys.pending, fps))
        return {bytes(fp) for fp, there in zip(fps, pipe_result, strict=True) if there}

    async def _exists_many(self, key: str, fields: list[bytes]) -> list[Any]:
        async with self.state.client.pipeline(transaction=False) as pipe:
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
        k = self.state.keys
        args: list[Any] = [self.state.clock.wall_ms()]
        for request in requests:
            args += [request.fingerprint, request.to_json()]
        keys = [k.seen, k.pending, k.pending_at, k.stats, k.dead_requests]
        return [bool(x) for x in await self.state.script("replay", keys, args)]
