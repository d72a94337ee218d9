"""The politeness slots of a Celery task's hosts: fetch as they allow, or send back for later.

Before each fetch the host's slot is taken in Redis
(`crawlq.celery.runtime.state.CeleryState.acquire`, one atomic step for every worker of the
job). A task whose host is not ready does not wait for it: the URLs it could not start are sent
back as a new task with a countdown until the host's window opens (not counted as an attempt),
which frees the worker slot. While some of its own fetches run, a task waits for one of them to
end before asking again (it holds the slot anyway). A host whose circuit breaker gave up gets
its URLs dead-lettered with no request.

All times are seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable

from crawlq.celery.runtime.state import CeleryState
from crawlq.celery.runtime.wire import Entry
from crawlq.engine.deps import Deps
from crawlq.engine.metrics import recorder
from crawlq.engine.outcome import Kind, Outcome
from crawlq.engine.step import process
from crawlq.errors import FrontierError
from crawlq.request import Lease
from crawlq.settings import Settings

__all__ = ["POLL_S", "SLEEP_UNDER_S", "SLOT_MARGIN_S", "HostSlots"]

POLL_S = 0.1
"""Seconds before a task retries a host whose concurrency is used up by other workers (the
countdown is jittered up to twice this)."""

SLOT_MARGIN_S = 5.0
"""Seconds beyond ``timeout_s`` after which a politeness slot that was never released (its
worker was killed mid-fetch) is freed for other workers."""

SLEEP_UNDER_S = 0.005
"""A host window opening sooner than this many seconds is waited for in the task instead of
a re-schedule through the broker."""


class HostSlots:
    """Runs one task's entries of each host under the host's politeness slots.

    Args:
        state: The job's Redis state (slots are acquired and released there).
        settings: The job's settings (``timeout_s`` bounds a slot's hold).
        deps: The job's deps (its politeness rules; `process` for a host that is down).
        worker_id: This thread's holder id of the slots it takes.
        fetch: Runs one entry under a slot token to its outcome.
    """

    def __init__(
        self,
        state: CeleryState,
        settings: Settings,
        deps: Deps,
        worker_id: str,
        fetch: Callable[[Entry, str], Awaitable[Outcome]],
    ) -> None:
        self.state = state
        self.settings = settings
        self.deps = deps
        self.worker_id = worker_id
        self.fetch = fetch

    async def run(  # noqa: C901  (acquire, wait, paused, down, probe, release: one slot's life in order)
        self,
        host: str,
        entries: list[Entry],
        outcomes: list[tuple[Entry, Outcome]],
        later: list[tuple[Entry, float]],
    ) -> None:
        """Fetch one host's entries as its politeness allows; re-schedule what must wait.

        Args:
            host: The host key of every entry.
            entries: The task's entries of that host.
            outcomes: Where each finished entry's outcome is appended.
            later: Where each entry that must wait for the host is appended, with its wait
                in seconds (a re-schedule through the broker, no attempt counted).
        """
        queue = deque(entries)
        running: dict[asyncio.Task[Outcome], Entry] = {}
        budget_end = time.monotonic() + self.settings.timeout_s
        hold_s = self.settings.timeout_s + SLOT_MARGIN_S  # one fetch at most per slot
        rules = self.deps.politeness
        policy = rules.configured(host) or rules.default  # Crawl-delay in Redis wins

        metrics = recorder()

        async def one(entry: Entry, token: str) -> Outcome:
            if metrics is not None:
                metrics.in_flight.inc()
            try:
                return await self.fetch(entry, token)
            finally:
                if metrics is not None:
                    metrics.in_flight.dec()
                with contextlib.suppress(FrontierError):
                    await self.state.release(host, [token])

        def collect(done: set[asyncio.Task[Outcome]]) -> None:
            for task in done:
                entry = running.pop(task)
                outcome = task.result()
                if outcome.kind is Kind.RELEASE:  # robots.txt took the slot: the page waits
                    queue.appendleft(entry)
                    if outcome.links:  # its sitemaps: enqueued with the task's other links
                        outcomes.append((entry, outcome))
                else:
                    outcomes.append((entry, outcome))

        while queue or running:
            if queue:
                grant = await self.state.acquire(
                    host, len(queue), policy, hold_s, holder=self.worker_id
                )
                if grant.down:  # its circuit breaker gave up: dead letters, no request
                    while queue:
                        entry = queue.popleft()
                        lease = Lease("down", entry.request, entry.attempt, self.worker_id, 0, True)
                        outcomes.append((entry, await process(lease, self.deps)))
                    continue
                for token in grant.tokens:
                    entry = queue.popleft()
                    running[asyncio.create_task(one(entry, token))] = entry
                if grant.tokens:
                    continue
                if grant.wait_s is not None and grant.wait_s <= SLEEP_UNDER_S:
                    await asyncio.sleep(grant.wait_s)
                    continue
                if grant.wait_s is None and running and time.monotonic() < budget_end:
                    pass  # our own fetches hold the slots: wait for one below
                else:
                    wait = grant.wait_s
                    if wait is None:
                        wait = POLL_S * (1 + random.random())
                    later.extend((Entry(e.request, e.attempt), wait) for e in queue)
                    queue.clear()
                    continue
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            collect(done)
