"""Dedup and pending URLs of the Celery engine: admit, take, settle, replay, reschedule, stale.

A URL's fingerprint enters ``seen`` once (``admit.lua``) and stays in ``pending`` until its
outcome is stored (``settle.lua``); ``pending_at`` holds when each pending URL is due, so that
`AdmissionMixin.stale` finds URLs whose task message was lost. A task about to run takes its
pending URLs (``take.lua``).

A Redis at its ``maxmemory`` refuses only `AdmissionMixin.admit` (new URLs:
`crawlq.errors.FrontierFull`); taking, settling and rescheduling go on
(`crawlq.celery.runtime.state.core.SCRIPTS`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from crawlq.celery.runtime.state.core import StateCore
from crawlq.celery.runtime.state.entries import owner_and_request, packed_fingerprints
from crawlq.celery.runtime.state.values import ENGINE_FIELD, RUN_PREFIX
from crawlq.errors import FrontierFull
from crawlq.request import CrawlRequest

__all__ = ["TAKE_DUPLICATE", "TAKE_RUN", "TAKE_UNSEEN", "AdmissionMixin"]

logger = logging.getLogger(__name__)

TAKE_DUPLICATE = 0
"""`AdmissionMixin.take`: the URL is settled (its outcome is stored): do not run it."""

TAKE_RUN = 1
"""`AdmissionMixin.take`: the URL is pending: run it."""

TAKE_UNSEEN = 2
"""`AdmissionMixin.take`: the URL was never admitted (a ``scrape.delay`` task): admit it."""


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
        flags = await self._script("admit", keys, args)
        if not self._marked:  # once per instance (after the job check): a Celery-engine job
            try:
                await self._call(lambda: self.client.hsetnx(k.job_info, ENGINE_FIELD, "celery"))
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
        got = await self._script("take", [k.seen, k.pending, k.pending_at, k.stats], args)
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
                (`crawlq.celery.runtime.state.Counts`) if this call settles any URL, so a task run
                again after it settled counts them once.
            run_counts: One mapping per fingerprint of ``done`` then ``dead`` (or none): the
                run counters of its outcome
                (`crawlq.celery.runtime.writes.outcome_counts`), added to the job's stats with
                the prefix `RUN_PREFIX` for each fingerprint that was still pending
                (`crawlq.celery.runtime.state.reads.ReadsMixin.run_counts` reads them back).

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
        await self._script("reschedule", keys, [due_ms, retries, *fingerprints])

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
        """Count ``n`` retries scheduled (negative: started).

        A positive ``n`` also counts in the job's retries ever scheduled (``retries``, for
        ``crawlq dashboard``). Runs on a Redis at its ``maxmemory`` (``reschedule.lua``).
        """
        await self.reschedule((), 0.0, retries=n)
