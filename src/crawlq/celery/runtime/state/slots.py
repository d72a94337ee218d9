"""Host politeness slots of the Celery engine (``acquire.lua``).

A host's next-allowed time and its held slots, each with a hold deadline (so that a killed
worker's slot comes back), move in one step for every worker.
"""

from __future__ import annotations

from collections.abc import Sequence

from crawlq.celery.runtime.state.core import StateCore
from crawlq.celery.runtime.state.values import Grant
from crawlq.frontier.redis.jobs import PAUSE_POLL_MS
from crawlq.rules.politeness import HostPolicy

__all__ = ["SlotsMixin"]


class SlotsMixin(StateCore):
    """Taking and giving back host slots."""

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
