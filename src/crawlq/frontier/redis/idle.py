"""The idle wait: a worker with nothing to lease blocks until work may be ready.

It registers in the job's ``idle`` set (``idle.lua``) and blocks on ``BLMOVE`` of the inbox
into its claim list, with a timeout that ends when the next host window opens, a retry falls
due or a lease expires. Pushes and settles that make a host ready leave one empty wake-up
token per idle worker on the inbox (``make_ready`` in ``_lib.lua``). No polling, except while
the inbox waits for room under a ``block`` bound, or while Redis is at its ``maxmemory``
(``BLMOVE`` is refused then), every `_FULL_INBOX_POLL_S` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from crawlq.errors import FrontierError, FrontierFull
from crawlq.frontier.redis.core import RedisCore

__all__ = ["IdleMixin"]


_FULL_INBOX_POLL_S = 1.0  # how often a worker looks for room for waiting inbox entries


class IdleMixin(RedisCore):
    """The wait between two leases that found nothing."""

    async def _next_wake_ms(self) -> int | None:
        k = self.keys

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for key in (k.ready, k.delayed, k.leases):
                    pipe.zrange(key, 0, 0, withscores=True)
                return await pipe.execute()

        firsts = await self._call(read)
        times = [int(first[0][1]) for first in firsts if first]
        return min(times) if times else None

    async def _wait(self, worker_id: str, timeout_s: float, *, pending: bool) -> None:
        """Block until a wake-up token or a producer's entry arrives, or ``timeout_s`` passes.

        ``pending``: the caller's last look saw work in flight or delayed. If that work was
        settled before this worker registered as idle (so no token was left for it) and the
        job is now drained, return at once instead of sleeping out the timeout. While the job
        is paused, ready hosts do not shorten the wait.
        """
        k = self.keys
        now = self.clock.wall_ms()

        # Register as idle first, then look once more: a settle or push that ran before the
        # registration is visible to this look, and one after it leaves a token.
        keys = [*k.host_keys(), k.leases, k.delayed]
        first_ready, inbox_len, leased, delayed = await self._script("idle", keys, [now, worker_id])
        if self.paused:  # ready hosts wait for `crawlq job resume`, which leaves tokens
            first_ready = pending = False
        if first_ready:  # a settle that ran just before may have made a host ready soon
            timeout_s = min(timeout_s, (int(first_ready) - now) / 1000)
        drained_since = pending and not (first_ready or leased or delayed)
        if inbox_len and (self.inbox_full or self.full):  # entries wait: look again in a while
            await self._call(lambda: self.client.zrem(k.idle, worker_id))
            await asyncio.sleep(max(0.0, min(timeout_s, _FULL_INBOX_POLL_S)))
            return
        if timeout_s <= 0 or inbox_len or drained_since:
            await self._call(lambda: self.client.zrem(k.idle, worker_id))
            return
        if timeout_s < 0.25:
            # Redis times blocking commands out on its 100 ms clock (hz 10): a short
            # politeness wait is slept here instead, exactly.
            await self._call(lambda: self.client.zrem(k.idle, worker_id))
            await asyncio.sleep(timeout_s)
            return
        try:
            got = await self._call(
                lambda: self.client.blmove(
                    k.inbox,
                    k.claim(worker_id),
                    max(0.01, timeout_s - 0.1),  # type: ignore[arg-type]  # hz 10 rounds up
                    "RIGHT",
                    "RIGHT",
                )
            )
            if got is not None:
                self._claim_pending.add(worker_id)
        except FrontierFull:  # BLMOVE may grow memory: refused at maxmemory, wait here instead
            self.full = True
            await asyncio.sleep(max(0.0, min(timeout_s, _FULL_INBOX_POLL_S)))
        finally:
            with contextlib.suppress(FrontierError):
                await self._call(lambda: self.client.zrem(k.idle, worker_id))
