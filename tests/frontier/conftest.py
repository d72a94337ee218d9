"""The frontier conformance fixture: every test in this folder runs against every backend.

A new backend is one more entry in ``BACKENDS`` and a branch in ``_open``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from crawlq.clock import Clock, ManualClock
from crawlq.frontier import Frontier, HostPolicy
from crawlq.frontier.sqlite import SqliteFrontier

BACKENDS = ["sqlite"]

MakeFrontier = Callable[..., Awaitable[Frontier]]


async def _open(backend: str, tmp_path: Path, policy: HostPolicy, clock: Clock) -> Frontier:
    if backend == "sqlite":
        return await SqliteFrontier.open(
            tmp_path / f"frontier-{id(clock)}.db", default_policy=policy, clock=clock
        )
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
async def make_frontier(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[MakeFrontier]:
    opened: list[Frontier] = []

    async def make(policy: HostPolicy | None = None, clock: Clock | None = None) -> Frontier:
        frontier = await _open(
            request.param, tmp_path, policy or HostPolicy(0.0, 1000), clock or ManualClock()
        )
        opened.append(frontier)
        return frontier

    yield make
    for frontier in opened:
        await frontier.close()
