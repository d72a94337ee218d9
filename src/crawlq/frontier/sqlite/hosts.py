"""Host politeness written by workers: Crawl-delay and AutoThrottle policies, and strikes.

A strike (a 429/503 pushback, or a connection failure) counts on the host row and moves its
next-allowed time by the plan's pause for that count; from ``probe_from`` strikes the host is
probed one request at a time (flag ``'p'``), from ``down_from`` it is down (flag ``'d'``) and
its queue is drained at once (`crawlq.rules.politeness.StrikePlan`).
"""

from __future__ import annotations

import sqlite3

from crawlq.frontier.sqlite.core import FrontierFile
from crawlq.rules.politeness import HostPolicy, Strike, StrikePlan

__all__ = ["HostsMixin"]


class HostsMixin(FrontierFile):
    """`set_host_policy` and `host_strike` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """See `crawlq.frontier.base.Frontier.set_host_policy`."""

        def step(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO frontier_hosts(host, delay_ms, concurrency) VALUES (?, ?, ?) "
                "ON CONFLICT(host) DO UPDATE SET delay_ms=excluded.delay_ms, "
                "concurrency=excluded.concurrency",
                (host, round(policy.delay_s * 1000), policy.concurrency),
            )

        await self._run(self._tx, step)
        self._wake()

    async def host_strike(self, host: str, strike: Strike, plan: StrikePlan) -> int:
        """See `crawlq.frontier.base.Frontier.host_strike`."""
        column = "pushbacks" if strike is Strike.PUSHBACK else "failures"
        now = self.clock.wall_ms()

        def step(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT OR IGNORE INTO frontier_hosts(host) VALUES (?)", (host,))
            (count, flags) = conn.execute(
                f"UPDATE frontier_hosts SET {column}={column}+1 WHERE host=? "
                f"RETURNING {column}, flags",
                (host,),
            ).fetchone()
            pause_ms = round(plan.pauses_s[min(count, len(plan.pauses_s)) - 1] * 1000)
            if plan.down_from and count >= plan.down_from:
                flags, until = "d", now  # drained at once, whatever its politeness
            else:
                if plan.probe_from and count >= plan.probe_from:
                    flags = "p"
                until = now + pause_ms
            conn.execute(
                "UPDATE frontier_hosts SET flags=?, next_at_ms=CASE WHEN ?='d' THEN ? "
                "ELSE max(next_at_ms, ?) END WHERE host=?",
                (flags, flags, until, until, host),
            )
            return int(count)

        count: int = await self._run(self._tx, step)
        self._wake()
        return count
