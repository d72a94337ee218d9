"""What the dashboard remembers of each job: samples over time, and store-side figures.

A `JobWatch` samples its job every ``interval_s`` seconds: the job report that
``crawlq status --json`` prints (`crawlq.ops.report.job_report`), plus, from the job's
store, the job's own dead letters by reason (``Store.counts(job=...)``) and the fetch time
(``PageRecord.elapsed_s``, stored with every page) of the pages the job stored since the last
sample (``Store.pages(job=...)``), for the slowest hosts. A store several jobs share thus
shows each job only its own. It keeps the last `HISTORY` samples in memory.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from crawlq.errors import CrawlqError
from crawlq.ops.report import job_report, job_settings, job_store_url
from crawlq.store import Store, open_store
from crawlq.urls import host_key

__all__ = ["HISTORY", "HostLatency", "JobWatch", "Sample"]

logger = logging.getLogger(__name__)

HISTORY = 300
"""Samples kept per job (10 minutes at the default 2 s interval)."""

LATENCY_WINDOW_S = 600.0
"""Pages fetched within this many seconds before the dashboard started count towards the
slowest hosts; after that, every page stored while it runs."""

MIN_PAGES = 3
"""Pages a host needs before it can be listed among the slowest."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading of a job.

    Attributes:
        at: Unix seconds.
        queue: Queued requests (pending, for a Celery job).
        pages_per_s: Acks per second over the last minute (None: not known, Celery).
        dead_per_s: Dead letters per second since the previous sample.
        retries_per_s: Retries scheduled per second since the previous sample.
    """

    at: float
    queue: int
    pages_per_s: float | None
    dead_per_s: float
    retries_per_s: float


@dataclass(slots=True)
class HostLatency:
    """Fetch time of one host's stored pages seen by the dashboard."""

    host: str
    pages: int = 0
    total_s: float = 0.0

    @property
    def mean_s(self) -> float:
        """Mean fetch time in seconds."""
        return self.total_s / self.pages if self.pages else 0.0

    @property
    def mean_ms(self) -> float:
        """Mean fetch time in milliseconds.

        What the page shows: loopback and LAN fetches take a few ms, which hundredths of a
        second round to 0.
        """
        return self.mean_s * 1000.0


@dataclass
class JobWatch:
    """Samples one job (module docstring).

    Args:
        frontier_url: The job's Redis.
        job: The job name.
        store_url: The store to read (None: the one the job's settings name).
    """

    frontier_url: str
    job: str
    store_url: str | None = None
    samples: deque[Sample] = field(default_factory=lambda: deque(maxlen=HISTORY))
    report: dict[str, Any] | None = None
    dead_by_reason: dict[str, int] = field(default_factory=dict)
    latency: dict[str, HostLatency] = field(default_factory=dict)
    error: str | None = None
    _store: Store | None = None
    _since: float = field(default_factory=lambda: time.time() - LATENCY_WINDOW_S)
    _last: tuple[float, int, int] | None = None  # at, dead, retries

    async def sample(self) -> None:
        """Read the job now and append a sample; a failure is kept in ``error``."""
        try:
            report = await job_report(self.frontier_url, self.job)
        except CrawlqError as exc:
            self.error = str(exc)
            return
        self.error = None
        self.observe(report)
        with contextlib.suppress(CrawlqError):
            await self.read_store()

    def observe(self, report: dict[str, Any]) -> None:
        """Take a fresh report (the latest shown) and append its sample."""
        now = time.time()
        self.report = report
        dead, retries = int(report.get("dead") or 0), int(report.get("retries") or 0)
        dead_rate = retry_rate = 0.0
        if self._last is not None and now > self._last[0]:
            span = now - self._last[0]
            dead_rate = max(0, dead - self._last[1]) / span
            retry_rate = max(0, retries - self._last[2]) / span
        self._last = (now, dead, retries)
        queue = report.get("queued")
        if queue is None:
            queue = report.get("pending") or 0
        self.samples.append(
            Sample(now, int(queue), report.get("pages_per_s"), dead_rate, retry_rate)
        )

    async def open_store(self) -> Store | None:
        """The job's store, opened read-only on first use (None: none readable from here).

        Raises:
            CrawlqError: The frontier or the store cannot be read.
        """
        if self._store is None:
            url = self.store_url
            if url is None:
                url = job_store_url(await job_settings(self.frontier_url, self.job))
            if url is None:
                return None
            self._store = await open_store(url, read_only=True)
        return self._store

    async def read_store(self) -> None:
        """Read the job's dead letters by reason and its pages stored since the last read.

        Raises:
            CrawlqError: The frontier or the store cannot be read.
        """
        store = await self.open_store()
        if store is None:
            return
        counts = await store.counts(job=self.job)
        self.dead_by_reason = dict(counts.dead_by_reason)
        since = self._since
        async for page in store.pages(since=since, job=self.job):
            if page.fetched_at > since:  # `since` is inclusive: skip the boundary page
                lat = self.latency.setdefault(host_key(page.url), HostLatency(host_key(page.url)))
                lat.pages += 1
                lat.total_s += page.elapsed_s
            self._since = max(self._since, page.fetched_at)

    def slowest(self, n: int = 10) -> list[HostLatency]:
        """The ``n`` hosts with the highest mean fetch time (at least `MIN_PAGES` pages)."""
        hosts = [h for h in self.latency.values() if h.pages >= MIN_PAGES]
        return sorted(hosts, key=lambda h: -h.mean_s)[:n]

    async def close(self) -> None:
        """Close the store."""
        if self._store is not None:
            with contextlib.suppress(CrawlqError):
                await self._store.close()
            self._store = None
