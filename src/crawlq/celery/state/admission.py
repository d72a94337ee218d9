"""Dedup and pending URLs of the Celery engine: admit, settle, replay, reschedule, stale.

A URL's fingerprint enters ``seen`` once (``admit.lua``) and stays in ``pending`` until its
outcome is stored (``settle.lua``); ``pending_at`` holds when each pending URL is due, so that
`AdmissionMixin.stale` finds URLs whose task message was lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from crawlq.celery.state.core import StateCore
from crawlq.celery.state.entries import owner_and_request, packed_fingerprints
from crawlq.celery.state.values import ENGINE_FIELD
from crawlq.request import CrawlRequest

__all__ = ["AdmissionMixin"]


class AdmissionMixin(StateCore):
    """Admitting URLs and settling them."""

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

    async def dead_requests(self, fingerprints: Sequence[bytes]) -> dict[bytes, CrawlRequest]:
        """The kept requests of dead-lettered URLs (those that decode), by fingerprint."""
        fps = list(fingerprints)
        if not fps:
            return {}
        values = await self._call(lambda: self.client.hmget(self.keys.dead_requests, fps))
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
                for fp in packed_fingerprints(packed)
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
