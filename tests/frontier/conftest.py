"""The frontier conformance fixture: every test in this folder runs against every backend.

The suites run per contract (`crawlq.frontier.contract`): ``test_queue.py``,
``test_hosts.py``, ``test_robots.py``, ``test_job.py``, ``test_inspection.py``,
``test_items.py``. A new backend is one more entry in ``BACKENDS`` and a branch in ``_open``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from crawlq.clock import Clock, ManualClock
from crawlq.frontier import Frontier, HostPolicy
from crawlq.frontier.queue import QueueBounds
from crawlq.frontier.redis import RedisFrontier
from crawlq.frontier.sqlite import SqliteFrontier
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import Politeness

BACKENDS = ["sqlite", "redis"]

MakeFrontier = Callable[..., Awaitable[Frontier]]

VT = 30.0  # visibility timeout, seconds


def reqs(*paths: str, host: str = "a.test", priority: int = 0) -> list[CrawlRequest]:
    return [CrawlRequest(f"http://{host}/{p}", priority=priority) for p in paths]


async def drain(frontier, n: int = 1000) -> list[str]:
    leases = await frontier.lease(n, "w", VT)
    await frontier.ack(leases)
    return [lease.request.url for lease in leases]


async def _open(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    politeness: Politeness,
    clock: Clock,
    bounds: QueueBounds | None,
) -> Frontier:
    if backend == "sqlite":
        return await SqliteFrontier.open(
            tmp_path / f"frontier-{id(clock)}.db", politeness=politeness, clock=clock, bounds=bounds
        )
    if backend == "redis":
        url = request.getfixturevalue("redis_url")
        job = f"test-{uuid.uuid4().hex[:12]}"
        return await RedisFrontier.open(
            url, job, politeness=politeness, clock=clock, create=True, bounds=bounds
        )
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
async def make_frontier(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[MakeFrontier]:
    opened: list[Frontier] = []

    async def make(
        policy: HostPolicy | None = None,
        clock: Clock | None = None,
        politeness: Politeness | None = None,
        bounds: QueueBounds | None = None,
    ) -> Frontier:
        rules = politeness or Politeness(default=policy or HostPolicy(0.0, 1000))
        frontier = await _open(
            request.param, request, tmp_path, rules, clock or ManualClock(), bounds
        )
        opened.append(frontier)
        return frontier

    yield make
    for frontier in opened:
        if isinstance(frontier, RedisFrontier):
            await frontier.drop()
        await frontier.close()
