"""Settling leases in the Redis frontier: ack, retry, dead, release (one ``settle.lua`` call).

A settle frees the host slot unless ``lease.lua`` freed it already, and skips a lease that
is no longer held (expired and re-leased, or settled), which the return value reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crawlq.frontier.redis.core import RedisCore
from crawlq.request import Lease

__all__ = ["SettleMixin"]


class SettleMixin(RedisCore):
    """Ack, retry, dead and release (`crawlq.frontier.base.Frontier`)."""

    async def ack(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.base.Frontier.ack`."""
        return await self._settle("ack", [(lease, "") for lease in leases])

    async def retry(self, lease: Lease, delay_s: float, reason: str) -> bool:
        """See `crawlq.frontier.base.Frontier.retry`."""
        if delay_s < 0:
            raise ValueError(f"delay_s must not be negative, got {delay_s}")
        due_ms = self.clock.wall_ms() + round(delay_s * 1000)
        return await self._settle("retry", [(lease, f"{due_ms} {reason}")]) == 1

    async def dead(self, lease: Lease, reason: str) -> bool:
        """See `crawlq.frontier.base.Frontier.dead`."""
        return await self._settle("dead", [(lease, reason)]) == 1

    async def release(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.base.Frontier.release`."""
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
            *k.host_keys(), k.leases, k.owner, k.stats, k.reqs, k.scores, k.attempts,
            k.delayed, k.dead, k.rate, k.strikes, k.last_error, k.dead_at,
            *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        args = [self.clock.wall_ms(), mode, self.politeness.default.concurrency, len(hosts)]
        return int(await self._script("settle", keys, [*args, *hosts, *body]))
