"""The frontier gauges of a job (`FrontierCollector`), read at each scrape.

The gauges are read from the job's frontier at each scrape by one exporter per job
(``crawlq status --prometheus-port``), so that workers never double-count them:
``crawlq_frontier_{queued,delayed,in_flight,dead,seen,done,pending}``,
``crawlq_frontier_pages_per_second``, ``crawlq_frontier_live_workers``,
``crawlq_frontier_host_queued{host}`` and ``crawlq_frontier_host_in_flight{host}`` for the
busiest hosts, ``crawlq_frontier_hosts_in_backoff{state}``, ``crawlq_store_pages`` and
``crawlq_status_up`` (0 when the last read failed). Each carries a ``crawlq_job`` label (not
``job``, which Prometheus sets to the scrape job).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["FrontierCollector"]

logger = logging.getLogger(__name__)


class FrontierCollector:
    """A prometheus-client collector of one job's frontier gauges (module docstring).

    The gauges come from the latest report given to `update` (a dict shaped like
    ``crawlq status --json``), so a scrape never waits for the frontier; the caller refreshes
    it on its own schedule.

    Args:
        job: The job name (the ``crawlq_job`` label).
    """

    def __init__(self, job: str) -> None:
        self.job = job
        self._report: Mapping[str, Any] | None = None
        self._up = 0

    def update(self, report: Mapping[str, Any] | None) -> None:
        """Publish a new report; None records a failed read (``crawlq_status_up`` 0)."""
        if report is None:
            self._up = 0
        else:
            self._report, self._up = report, 1

    def describe(self) -> list[Any]:
        """No fixed description: the families depend on the report (Celery or native)."""
        return []

    def collect(self) -> Iterator[Any]:
        """The gauge families of the latest report."""
        from prometheus_client.core import GaugeMetricFamily

        labels = ["crawlq_job"]
        up = GaugeMetricFamily(
            "crawlq_status_up", "1 when the last read of the frontier succeeded.", labels=labels
        )
        up.add_metric([self.job], self._up)
        yield up
        report = self._report
        if report is None:
            return
        for key, help_text in (
            ("queued", "Requests waiting for a lease."),
            ("delayed", "Retries waiting for their due time."),
            ("in_flight", "Requests leased now."),
            ("dead", "URLs dead-lettered."),
            ("seen", "Distinct URLs ever admitted."),
            ("done", "URLs acknowledged."),
            ("pending", "Celery engine: URLs queued in the broker or running."),
            ("pages_per_s", "Pages acknowledged per second over the last minute."),
            ("stored", "Pages this job wrote to its store."),
            ("retries", "Retries scheduled so far."),
        ):
            value = report.get(key)
            if value is None:
                continue
            name = {
                "pages_per_s": "crawlq_frontier_pages_per_second",
                "stored": "crawlq_store_pages",
                "retries": "crawlq_frontier_retries",
            }.get(key, f"crawlq_frontier_{key}")
            family = GaugeMetricFamily(name, help_text, labels=labels)
            family.add_metric([self.job], float(value))
            yield family
        workers = report.get("workers")
        if workers is not None:
            family = GaugeMetricFamily(
                "crawlq_frontier_live_workers", "Workers with a recent heartbeat.", labels=labels
            )
            family.add_metric([self.job], len(workers))
            yield family
        queued = GaugeMetricFamily(
            "crawlq_frontier_host_queued",
            "Queued requests of the busiest hosts.",
            labels=[*labels, "host"],
        )
        in_flight = GaugeMetricFamily(
            "crawlq_frontier_host_in_flight",
            "Leased requests of the busiest hosts.",
            labels=[*labels, "host"],
        )
        for host in report.get("hosts") or ():
            queued.add_metric([self.job, host["host"]], host["queued"])
            in_flight.add_metric([self.job, host["host"]], host["in_flight"])
        yield queued
        yield in_flight
        backoff = GaugeMetricFamily(
            "crawlq_frontier_hosts_in_backoff",
            "Hosts in backoff, by state (backoff, parked, down).",
            labels=[*labels, "state"],
        )
        states: dict[str, int] = {"backoff": 0, "parked": 0, "down": 0}
        for b in report.get("backoff") or ():
            states[b["state"]] = states.get(b["state"], 0) + 1
        for state, n in sorted(states.items()):
            backoff.add_metric([self.job, state], n)
        yield backoff
