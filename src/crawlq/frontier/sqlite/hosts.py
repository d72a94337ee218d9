"""Host rules in the SQLite file (`crawlq.frontier.hosts.HostRules`): policies, strikes, proxies.

Host politeness written by workers: Crawl-delay and AutoThrottle policies, and strikes.

A strike (a 429/503 pushback, or a connection failure) counts on the host row and moves its
next-allowed time by the plan's pause for that count; from ``probe_from`` strikes the host is
probed one request at a time (flag ``'p'``), from ``down_from`` it is down (flag ``'d'``) and
its queue is drained at once (`crawlq.rules.politeness.StrikePlan`).

Proxy failures are rows of ``frontier_proxies`` (`crawlq.rules.proxies`).
"""

from __future__ import annotations

import sqlite3
from typing import cast

from crawlq.frontier.sqlite.file import FrontierFile
from crawlq.rules.politeness import HostPolicy, Strike, StrikePlan
from crawlq.rules.proxies import BenchPlan, ProxyState

__all__ = ["SqliteHostRules"]


class SqliteHostRules(FrontierFile):
    """Host policies and strikes, and proxy failures, of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """See `crawlq.frontier.hosts.HostRules.set_host_policy`."""

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
        """See `crawlq.frontier.hosts.HostRules.host_strike`."""
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

    async def proxy_failure(self, proxy_id: str, plan: BenchPlan) -> ProxyState:
        """See `crawlq.frontier.hosts.HostRules.proxy_failure`."""
        now = self.clock.wall_ms()

        def step(conn: sqlite3.Connection) -> ProxyState:
            conn.execute("INSERT OR IGNORE INTO frontier_proxies(id) VALUES (?)", (proxy_id,))
            row = conn.execute(
                "SELECT failures, benches, until_ms FROM frontier_proxies WHERE id=?", (proxy_id,)
            ).fetchone()
            failures, benches, until_ms = _values(row) or (0, 0, 0)
            if until_ms > now:  # benched already
                return ProxyState(failures, benches, until_ms)
            failures += 1
            if failures >= plan.failures_to_bench:
                benches += 1
                until_ms, failures = now + plan.length_ms(benches), 0
            conn.execute(
                "UPDATE frontier_proxies SET failures=?, benches=?, until_ms=? WHERE id=?",
                (failures, benches, until_ms, proxy_id),
            )
            return ProxyState(failures, benches, until_ms)

        state: ProxyState = await self._run(self._tx, step)
        return state

    async def proxy_ok(self, proxy_id: str) -> None:
        """See `crawlq.frontier.hosts.HostRules.proxy_ok`."""

        def step(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM frontier_proxies WHERE id=?", (proxy_id,))

        await self._run(self._tx, step)

    async def proxy_states(self) -> dict[str, ProxyState]:
        """See `crawlq.frontier.hosts.HostRules.proxy_states`."""

        def step(conn: sqlite3.Connection) -> dict[str, ProxyState]:
            rows = conn.execute("SELECT id, failures, benches, until_ms FROM frontier_proxies")
            return {str(r[0]): ProxyState(*v) for r in rows if (v := _values(r[1:])) is not None}

        states: dict[str, ProxyState] = await self._run(self._tx, step)
        return states


_MAX = 2**63 - 1


def _values(row: tuple[object, ...]) -> tuple[int, int, int] | None:
    """``(failures, benches, until_ms)`` of a row, or None when a cell is not such a count.

    The file is written by every worker of the frontier; a row some other writer left
    (text, a negative or too large number) starts a clean count, as the Redis backend does.
    """
    if len(row) != 3 or not all(type(v) is int and 0 <= v <= _MAX for v in row):
        return None
    return cast("tuple[int, int, int]", tuple(row))
