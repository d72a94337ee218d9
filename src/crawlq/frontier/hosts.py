"""The host rules contract (`HostRules`): per-host politeness, strikes and the breaker, proxies.

What every worker of a job must agree on about a host or a proxy, kept by the frontier so that
it holds for all of them at once: a host's politeness override (robots.txt Crawl-delay,
AutoThrottle), its strikes in a row (429/503 pushback, connection failures) and the breaker
they trip, and the failures and benches of each proxy. `crawlq.rules.politeness` and
`crawlq.rules.proxies` decide the numbers; a backend stores and applies them atomically.
"""

from __future__ import annotations

from typing import Protocol

from crawlq.rules.politeness import HostPolicy, Strike, StrikePlan
from crawlq.rules.proxies import BenchPlan, ProxyState

__all__ = ["HostRules"]


class HostRules(Protocol):
    """Host politeness, strikes and proxy failures for every worker of a job."""

    async def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """Override the default politeness of one host (e.g. from robots.txt Crawl-delay)."""
        ...

    async def host_strike(self, host: str, strike: Strike, plan: StrikePlan) -> int:
        """Count one strike of ``host`` and pause it, in one atomic step for every worker.

        Increments the host's count of strikes of this kind in a row (an ack of any of its
        requests resets both kinds, and its breaker flags), then moves its next-allowed time
        to at least now + ``plan.pauses_s[count - 1]`` (the last entry repeats); a later
        next-allowed time is kept. From ``plan.probe_from`` on the host takes one request at a
        time; from ``plan.down_from`` on it is down (see the module docstring).

        Args:
            host: Politeness key.
            strike: Pushback (429/503) or connection failure.
            plan: The pause schedule (`crawlq.rules.politeness.Politeness.plan`).

        Returns:
            The count of this kind in a row, this strike included.
        """
        ...

    async def proxy_failure(self, proxy_id: str, plan: BenchPlan) -> ProxyState:
        """Count one failure of a proxy; bench it after ``plan.failures_to_bench`` in a row.

        One atomic step for every worker: a proxy benched already is left as it is (a
        request sent before the bench was seen counts nothing more); otherwise its failures
        in a row go up, and at ``plan.failures_to_bench`` it is benched until now +
        ``plan.length_ms(benches)`` and its count starts again (`crawlq.rules.proxies`).

        Args:
            proxy_id: `crawlq.rules.proxies.Proxy.id` (never a credential).
            plan: How many failures bench it, and for how long.

        Returns:
            Its state after this failure.
        """
        ...

    async def proxy_ok(self, proxy_id: str) -> None:
        """Forget a proxy's failures and benches in a row: a request through it succeeded."""
        ...

    async def proxy_states(self) -> dict[str, ProxyState]:
        """Every proxy with failures or a bench, by id (one read, for a worker's view)."""
        ...
