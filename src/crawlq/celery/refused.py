"""What ``crawl --engine celery`` does about workers that refuse its job.

A worker whose store, spider or a job setting differs from the job's refuses the job's tasks and
records why in the job's Redis (`crawlq.celery.tasks.deliver`). `RefusalWatch` is the waiting
crawl's side: every `EVERY_S` it prints each new refusal once per worker and reason ("worker W
refuses job J: …; start workers with …"), and writes the URLs dead-lettered ``worker_refused``
(refused ``celery_max_refusals`` times) to the job's store, which the refusing worker could not
(it refuses that store), so the crawl ends with them counted as dead letters.
"""

from __future__ import annotations

import logging
import time

from crawlq.celery.runtime.refusals import Refusals, RefusedDead
from crawlq.celery.runtime.state import CeleryState
from crawlq.engine.outcome import stored_job
from crawlq.records import DeadRecord
from crawlq.settings import Settings
from crawlq.store import ResultBatch, Store

__all__ = ["EVERY_S", "REASON", "RefusalWatch", "dead_record"]

logger = logging.getLogger(__name__)

EVERY_S = 1.0
"""Seconds between two looks at the job's refusals."""

REASON = "worker_refused"
"""Dead-letter reason of a URL whose task workers refused ``celery_max_refusals`` times."""

SINCE_SLACK_MS = 5_000
"""Refusals up to this long before the crawl started are shown too (clocks differ)."""


def dead_record(found: RefusedDead, job: str) -> DeadRecord:
    """The store's dead letter of a URL dead-lettered ``worker_refused``."""
    req, r = found.request, found.refusal
    detail = f"worker {r.worker} refuses job {job} ({found.refusals} refusals): {r.reason}"
    return DeadRecord(
        req.record_fingerprint, req.url, REASON, detail, 0, req.depth, r.at_ms / 1000,
        req.referrer,
    )  # fmt: skip


class RefusalWatch:
    """Print a job's refusals and store its ``worker_refused`` dead letters (module docstring).

    Args:
        state: The job's Redis state.
        store: The job's store.
        settings: The crawl's settings (``job``, ``frontier``).
    """

    def __init__(self, state: CeleryState, store: Store, settings: Settings) -> None:
        self.state = state
        self.refusals = Refusals(state)
        self.store = store
        self.settings = settings
        self.since_ms = state.clock.wall_ms() - SINCE_SLACK_MS
        self._shown: set[tuple[str, str]] = set()
        self._next = 0.0

    async def look(self, *, now: bool = False) -> None:
        """Every `EVERY_S` (or ``now``): print new refusals, store refused dead letters.

        Raises:
            FrontierUnavailable, StoreError: Redis or the store failed (the caller waits).
        """
        if not now and time.monotonic() < self._next:
            return
        self._next = time.monotonic() + EVERY_S
        for r in await self.refusals.refusals():
            key = (r.worker, r.reason)
            if r.at_ms < self.since_ms or key in self._shown:
                continue
            self._shown.add(key)
            logger.error(
                "worker %s refuses job %s: %s; start workers with the job's settings "
                "(`crawlq job settings %s`), or stop that worker: a URL it refuses %d times "
                "is dead-lettered %s",
                r.worker,
                self.state.job,
                r.reason,
                self.state.job,
                self.settings.celery_max_refusals,
                REASON,
            )
        await self.store_dead()

    async def store_dead(self) -> int:
        """Write the ``worker_refused`` dead letters waiting in Redis to the store.

        Returns:
            How many were written.
        """
        written = 0
        while True:
            found = await self.refusals.refused_dead()
            if not found:
                return written
            records = [dead_record(f, self.state.job) for f in found]
            await self.store.write(ResultBatch(dead=records, job=stored_job(self.settings)))
            await self.refusals.forget_refused_dead([f.fingerprint for f in found])
            written += len(found)
