"""Proxy failures in the Redis frontier: the ``proxies`` hash and ``proxy_strike.lua``.

`crawlq.rules.proxies` decides what a failure is and how long a bench lasts; this stores the
count where every worker (native or Celery) of the job reads it.
"""

from __future__ import annotations

from crawlq.frontier.redis.core import RedisCore
from crawlq.rules.proxies import BenchPlan, ProxyState

__all__ = ["ProxiesMixin"]


class ProxiesMixin(RedisCore):
    """`proxy_failure`, `proxy_ok` and `proxy_states` (`crawlq.frontier.base.Frontier`)."""

    async def proxy_failure(self, proxy_id: str, plan: BenchPlan) -> ProxyState:
        """See `crawlq.frontier.base.Frontier.proxy_failure`."""
        args = [self.clock.wall_ms(), proxy_id, plan.failures_to_bench, plan.bench_ms]
        args.append(plan.max_doublings)
        got = await self._script("proxy_strike", [self.keys.proxies], args)
        return ProxyState(int(got[0]), int(got[1]), int(got[2]))

    async def proxy_ok(self, proxy_id: str) -> None:
        """See `crawlq.frontier.base.Frontier.proxy_ok`."""
        key = self.keys.proxies
        await self._call(lambda: self.client.hdel(key, proxy_id))

    async def proxy_states(self) -> dict[str, ProxyState]:
        """See `crawlq.frontier.base.Frontier.proxy_states`."""
        key = self.keys.proxies
        rows = await self._call(lambda: self.client.hgetall(key))
        return {_text(k): state for k, v in rows.items() if (state := _state(v)) is not None}


_MAX_DIGITS = 15
"""Longest count ``proxy_strike.lua`` reads: Lua numbers are exact integers up to 2**53."""


def _text(value: bytes | str) -> str:
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


def _state(value: bytes | str) -> ProxyState | None:
    """A row of the hash (untrusted: a bad one is skipped, as ``proxy_strike.lua`` does)."""
    parts = _text(value).split(" ")
    if len(parts) != 3 or not all(p.isdigit() and len(p) <= _MAX_DIGITS for p in parts):
        return None
    return ProxyState(int(parts[0]), int(parts[1]), int(parts[2]))
