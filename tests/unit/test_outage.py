"""The engines' waits in a backend outage, and the pushes a full Redis refuses (no services).

`crawlq.engine.outage`: a worker polls a backend that is down (so it is back within
`OUTAGE_CAP_S` of the backend's return) and logs a long outage sparingly; `FullFrontier`
counts the links a Redis at its ``maxmemory`` refused and logs that state once a minute.
"""

from __future__ import annotations

import logging

import pytest

from crawlq.clock import Every, ManualClock
from crawlq.engine.outage import (
    OUTAGE_CAP_S,
    FullFrontier,
    outage_logged,
    outage_wait_s,
)
from crawlq.errors import FrontierFull, FrontierUnavailable
from crawlq.frontier.queue import FULL_LOG_EVERY_S
from crawlq.request import CrawlRequest


def test_a_worker_polls_a_backend_that_is_down() -> None:
    # Redis back after a 5 s restart: the worker's next try is at most OUTAGE_CAP_S away
    # whatever the number of failed tries so far (it was 8 s, up to 30 s, before).
    assert OUTAGE_CAP_S <= 2.0
    for failures in range(1, 200):
        waits = [outage_wait_s(failures) for _ in range(50)]
        assert max(waits) <= OUTAGE_CAP_S
        assert min(waits) >= 0.25  # equal jitter: a poll, never a busy loop
    slept, failures = 0.0, 0
    while slept < 5.0:  # a 5 s outage: the try after Redis returns comes within the cap
        failures += 1
        slept += outage_wait_s(failures)
    assert slept - 5.0 <= OUTAGE_CAP_S


def test_a_long_outage_is_not_a_line_per_poll() -> None:
    logged = [n for n in range(1, 301) if outage_logged(n)]
    assert logged[:3] == [1, 2, 3]
    assert len(logged) == 3 + 300 // 15  # a line about every 20 s at the cap


def test_every_says_due_at_once_then_once_per_period() -> None:
    clock = ManualClock()
    every = Every(60.0, clock)
    assert every.due()
    clock.advance(59.9)
    assert not every.due()
    clock.advance(0.1)
    assert every.due()
    assert not every.due()
    every.reset()
    assert every.due()


def _full() -> FrontierFull:
    return FrontierFull("j", "OOM command not allowed when used memory > 'maxmemory'")


async def test_a_full_redis_refuses_links_counted_and_logged_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    full = FullFrontier(clock)
    links = [CrawlRequest(f"http://a.test/{n}") for n in range(3)]
    answer: Exception | None = _full()

    async def push(batch: list[CrawlRequest]) -> int:
        if answer is not None:
            raise answer
        return len(batch)

    with caplog.at_level(logging.WARNING, logger="crawlq.engine.outage"):
        for _ in range(100):  # a hundred refused pushes within the minute
            assert await full.attempt(len(links), lambda: push(links)) is None
            clock.advance(0.1)
        assert full.full and full.refused == 300
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1, lines
        assert "Redis is full" in lines[0] and "frontier_full: 3 so far" in lines[0]
        clock.advance(FULL_LOG_EVERY_S)
        assert await full.attempt(len(links), lambda: push(links)) is None
        assert "frontier_full: 303 so far" in caplog.records[-1].getMessage()
        answer = None  # room again
        assert await full.attempt(len(links), lambda: push(links)) == 3
        assert not full.full
        assert "room again" in caplog.records[-1].getMessage()
        assert len(caplog.records) == 3
    assert full.reason == "frontier_full"


async def test_an_outage_is_not_a_full_redis() -> None:
    async def push(batch: list[CrawlRequest]) -> int:
        raise FrontierUnavailable("Redis unavailable")

    with pytest.raises(FrontierUnavailable):
        links = [CrawlRequest("http://a.test/")]
        await FullFrontier().attempt(1, lambda: push(links))
