"""Host politeness in the Redis frontier: overrides and strikes (``policy.lua``, ``strike.lua``).

`crawlq.rules.politeness` decides the numbers (delays, concurrency, the strike plan); these scripts
store and apply them for every worker at once.
"""

from __future__ import annotations

from typing import Any

from crawlq.frontier.redis.core import RedisCore
from crawlq.rules.politeness import HostPolicy, Strike, StrikePlan

__all__ = ["HostsMixin"]


class HostsMixin(RedisCore):
    """Per-host policy and strikes (`crawlq.frontier.base.Frontier`)."""

    async def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """See `crawlq.frontier.base.Frontier.set_host_policy`."""
        args = [host, round(policy.delay_s * 1000), policy.concurrency]
        await self._script("policy", [self.keys.policy], args)

    async def host_strike(self, host: str, strike: Strike, plan: StrikePlan) -> int:
        """See `crawlq.frontier.base.Frontier.host_strike`."""
        k = self.keys
        ddelay, dconc = self._policy_args()
        args: list[Any] = [self.clock.wall_ms(), host, str(strike), ddelay, dconc]
        args += [plan.probe_from, plan.down_from, *(round(s * 1000) for s in plan.pauses_s)]
        return int(await self._script("strike", [*k.host_keys(), k.strikes], args))
