"""Host rules on Redis (`crawlq.frontier.hosts.HostRules`): overrides, strikes, proxy failures.

`crawlq.rules.politeness` decides the numbers (delays, concurrency, the strike plan) and
`crawlq.rules.proxies` what a proxy failure is and how long a bench lasts; the scripts
(``policy.lua``, ``strike.lua``, ``proxy_strike.lua``) store and apply them for every worker
(native or Celery) of the job at once. Proxy counts are the ``proxies`` hash.
"""

from __future__ import annotations

from typing import Any

from crawlq.frontier.redis.client import RedisClient
from crawlq.rules.politeness import HostPolicy, Strike, StrikePlan
from crawlq.rules.proxies import BenchPlan, ProxyState

__all__ = ["RedisHostRules"]


class RedisHostRules(RedisClient):
    """Per-host policy and strikes, and proxy failures (`crawlq.frontier.hosts.HostRules`)."""

    async def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """See `crawlq.frontier.hosts.HostRules.set_host_policy`."""
        args = [host, round(policy.delay_s * 1000), policy.concurrency]
        await self._script("policy", [self.keys.policy], args)

    async def host_strike(self, host: str, strike: Strike, plan: StrikePlan) -> int:
        """See `crawlq.frontier.hosts.HostRules.host_strike`."""
        k = self.keys
        ddelay, dconc = self._policy_args()
        args: list[Any] = [self.clock.wall_ms(), host, str(strike), ddelay, dconc]
        args += [plan.probe_from, plan.down_from, *(round(s * 1000) for s in plan.pauses_s)]
        return int(await self._script("strike", [*k.host_keys(), k.strikes], args))

    async def proxy_failure(self, proxy_id: str, plan: BenchPlan) -> ProxyState:
        """See `crawlq.frontier.hosts.HostRules.proxy_failure`."""
        args = [self.clock.wall_ms(), proxy_id, plan.failures_to_bench, plan.bench_ms]
        args.append(plan.max_doublings)
        got = await self._script("proxy_strike", [self.keys.proxies], args)
        return ProxyState(int(got[0]), int(got[1]), int(got[2]))

    async def proxy_ok(self, proxy_id: str) -> None:
        """See `crawlq.frontier.hosts.HostRules.proxy_ok`."""
        key = self.keys.proxies
        await self._call(lambda: self.client.hdel(key, proxy_id))

    async def proxy_states(self) -> dict[str, ProxyState]:
        """See `crawlq.frontier.hosts.HostRules.proxy_states`."""
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
