"""Proxy failures in the SQLite frontier: ``frontier_proxies`` (`crawlq.rules.proxies`)."""

from __future__ import annotations

import sqlite3
from typing import cast

from crawlq.frontier.sqlite.core import FrontierFile
from crawlq.rules.proxies import BenchPlan, ProxyState

__all__ = ["ProxiesMixin"]


class ProxiesMixin(FrontierFile):
    """`proxy_failure`, `proxy_ok`, `proxy_states` of `crawlq.frontier.sqlite.SqliteFrontier`."""

    async def proxy_failure(self, proxy_id: str, plan: BenchPlan) -> ProxyState:
        """See `crawlq.frontier.base.Frontier.proxy_failure`."""
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
        """See `crawlq.frontier.base.Frontier.proxy_ok`."""

        def step(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM frontier_proxies WHERE id=?", (proxy_id,))

        await self._run(self._tx, step)

    async def proxy_states(self) -> dict[str, ProxyState]:
        """See `crawlq.frontier.base.Frontier.proxy_states`."""

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
