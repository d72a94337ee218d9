"""Prometheus metrics of crawlq: what workers count, the frontier gauges of a job, serving.

Names follow the Prometheus naming conventions (https://prometheus.io/docs/practices/naming/):
a ``crawlq_`` prefix, base units in the name (``_seconds``, ``_bytes``), ``_total`` on
counters. Labels hold bounded codes only (status class, reason codes, host names of the top
queues), never URLs.

Worker metrics (`WorkerMetrics`), updated by both engines when an outcome is written to the
store (so that, once a job is settled, the counters of all its workers add up to the store's
pages, dead letters and filtered records; a redirect back into its own chain whose revisit
was queued, a cookie wall's, one to the page's own fragment or one of a loop
(`crawlq.engine.redirects`), is counted as a hop, not a page, since each revisit's record,
page or dead letter, replaces one: one record per URL; `crawlq.engine.outcome.Outcome.revisit`):

| metric | type | labels | what |
|---|---|---|---|
| ``crawlq_pages_total`` | counter | ``status_class`` (``2xx``…) | pages stored |
| ``crawlq_cookie_wall_hops_total`` | counter | | redirects back into their chain, revisited |
| ``crawlq_items_total`` | counter | | items stored |
| ``crawlq_response_bytes_total`` | counter | | body bytes of the pages stored |
| ``crawlq_fetch_duration_seconds`` | histogram | | fetch time of each page stored |
| ``crawlq_retries_total`` | counter | ``reason`` | transient failures sent back for a retry |
| ``crawlq_dead_letters_total`` | counter | ``reason`` | URLs dead-lettered |
| ``crawlq_filtered_total`` | counter | ``reason`` | URLs filtered after leasing (robots.txt…) |
| ``crawlq_links_not_followed_total`` | counter | ``reason`` | links not followed, by reason |
| ``crawlq_spider_errors_total`` | counter | | pages whose callback failed |
| ``crawlq_items_dropped_total`` | counter | ``pipeline``, ``reason`` | items not stored |
| ``crawlq_leases_in_flight`` | gauge | | URLs being processed now |

Frontier gauges (`FrontierCollector`): the gauges are read from the job's frontier at each
scrape by one exporter per job (``crawlq status --prometheus-port``), so that workers never
double-count them: ``crawlq_frontier_{queued,delayed,in_flight,dead,seen,done,pending}``,
``crawlq_frontier_pages_per_second``, ``crawlq_frontier_live_workers``,
``crawlq_frontier_host_queued{host}`` and ``crawlq_frontier_host_in_flight{host}`` for the
busiest hosts, ``crawlq_frontier_hosts_in_backoff{state}``, ``crawlq_store_pages`` and
``crawlq_status_up`` (0 when the last read failed). Each carries a ``crawlq_job`` label (not
``job``, which Prometheus sets to the scrape job).

Serving (`serve`, `MetricsServer`): one process's metrics over HTTP. Several processes: a
``--processes P`` supervisor (or a Celery worker's main process) serves its children's metrics
summed, with prometheus-client's multiprocess mode: the children write to files in a private
directory named by ``PROMETHEUS_MULTIPROC_DIR`` (`MultiprocessExporter`). prometheus-client is
the ``metrics`` extra (``pip install 'crawlq[metrics]'``) and is imported only when metrics are
turned on.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from crawlq.errors import ConfigError

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from crawlq.engine.outcome import Outcome

__all__ = [
    "LATENCY_BUCKETS_S",
    "MULTIPROC_ENV",
    "FrontierCollector",
    "MetricsServer",
    "MultiprocessExporter",
    "WorkerMetrics",
    "drop_labels",
    "prometheus",
    "recorder",
    "serve",
    "start_recording",
    "status_class",
]

logger = logging.getLogger(__name__)


MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's variable naming the directory where each process of a group writes its
metrics (multiprocess mode). It must be set before prometheus-client is first imported."""

LATENCY_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds, in seconds, of the fetch duration histogram's buckets."""


def prometheus() -> Any:
    """The prometheus_client module, or a `ConfigError` naming the extra to install."""
    try:
        import prometheus_client
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            "metrics_port", f"metrics need prometheus-client: pip install 'crawlq[metrics]' ({exc})"
        ) from exc
    return prometheus_client


def status_class(status: int) -> str:
    """The status class label of an HTTP status: ``2xx`` for 200..299, and so on."""
    return f"{status // 100}xx" if 100 <= status <= 599 else "other"


class WorkerMetrics:
    """The counters one worker process updates (see the module docstring's table).

    Args:
        registry: Where to register them (None: prometheus-client's default registry; in
            multiprocess mode the values go to files whatever the registry).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        pc = prometheus()
        reg = registry if registry is not None else pc.REGISTRY
        self.pages = pc.Counter(
            "crawlq_pages", "Pages stored, by HTTP status class.", ["status_class"], registry=reg
        )
        self.cookie_wall_hops = pc.Counter(
            "crawlq_cookie_wall_hops",
            "Redirects back into their own chain (a cookie wall's, to the page's own fragment, "
            "a loop's), their target fetched again.",
            registry=reg,
        )
        self.items = pc.Counter("crawlq_items", "Items stored.", registry=reg)
        self.response_bytes = pc.Counter(
            "crawlq_response_bytes", "Body bytes of the pages stored.", registry=reg
        )
        self.fetch_duration = pc.Histogram(
            "crawlq_fetch_duration_seconds",
            "Fetch time of each page stored, in seconds.",
            buckets=LATENCY_BUCKETS_S,
            registry=reg,
        )
        self.retries = pc.Counter(
            "crawlq_retries", "Transient failures sent back for a retry.", ["reason"], registry=reg
        )
        self.dead_letters = pc.Counter(
            "crawlq_dead_letters", "URLs dead-lettered, by reason.", ["reason"], registry=reg
        )
        self.filtered = pc.Counter(
            "crawlq_filtered", "URLs filtered after leasing, by reason.", ["reason"], registry=reg
        )
        self.not_followed = pc.Counter(
            "crawlq_links_not_followed",
            "Discovered links not followed, by scope reason.",
            ["reason"],
            registry=reg,
        )
        self.spider_errors = pc.Counter(
            "crawlq_spider_errors", "Pages whose spider callback failed.", registry=reg
        )
        self.items_dropped = pc.Counter(
            "crawlq_items_dropped",
            "Items not stored, by pipeline and reason.",
            ["pipeline", "reason"],
            registry=reg,
        )
        self.in_flight = pc.Gauge(
            "crawlq_leases_in_flight",
            "URLs this worker is processing now.",
            registry=reg,
            multiprocess_mode="livesum",
        )

    def settled(self, outcome: Outcome, *, revisited: bool = False) -> None:
        """Count one outcome that was just written to the store (page, dead or filtered).

        Args:
            outcome: The outcome.
            revisited: Its `Outcome.revisit` was queued (`Outcome.is_hop`): the revisit's
                record replaces one, and is counted then; this one counts as a cookie-wall hop.
        """
        page = outcome.page
        if page is not None and revisited:
            self.cookie_wall_hops.inc()
        elif page is not None:
            self.pages.labels(status_class(page.status)).inc()
            self.response_bytes.inc(page.size_bytes)
            self.fetch_duration.observe(page.elapsed_s)
            if page.error is not None and page.error.startswith("spider_error"):
                self.spider_errors.inc()
        elif outcome.dead is not None:
            self.dead_letters.labels(outcome.reason).inc()
        elif outcome.filtered is not None:
            self.filtered.labels(outcome.reason).inc()
        if outcome.items and not (page is not None and revisited):  # errbacks' items too
            self.items.inc(len(outcome.items))
        for reason, n in outcome.skipped.items():
            self.not_followed.labels(reason).inc(n)
        for dropped, n in outcome.dropped.items():
            self.items_dropped.labels(*drop_labels(dropped)).inc(n)

    def retried(self, reason: str) -> None:
        """Count one transient failure sent back for a retry."""
        self.retries.labels(reason).inc()


_recorder: WorkerMetrics | None = None
_recorder_lock = threading.Lock()


def drop_labels(dropped: str) -> tuple[str, str]:
    """``(pipeline, reason)`` of an `Outcome.dropped` key; a bad item's reason is its field.

    ``pipeline`` is ``validation``, ``item_dedup`` (reason ``duplicate_item``) or a
    pipeline's class name (its `DropItem` reason, or ``dropped``).

    ``"validation: invalid: field price: expected int, got str"`` is
    ``("validation", "invalid: field price")``: the field names are bounded, the values
    in the rest are not.
    """
    pipeline, _, reason = dropped.partition(": ")
    if pipeline == "validation":
        reason = ": ".join(reason.split(": ")[:2])
    return pipeline, reason


def recorder() -> WorkerMetrics | None:
    """This process's worker metrics, or None when metrics are off (nothing to update)."""
    return _recorder


def start_recording(registry: CollectorRegistry | None = None) -> WorkerMetrics:
    """Turn this process's worker metrics on (idempotent) and return them.

    In multiprocess mode (``PROMETHEUS_MULTIPROC_DIR`` set) prometheus-client must not have
    been imported before the variable was set; that is checked.

    Raises:
        ConfigError: prometheus-client is missing, or was imported before
            ``PROMETHEUS_MULTIPROC_DIR`` was set.
    """
    global _recorder
    with _recorder_lock:
        if _recorder is None:
            pc = prometheus()
            if os.environ.get(MULTIPROC_ENV) and not getattr(
                pc.values.ValueClass, "_multiprocess", False
            ):
                raise ConfigError(
                    "metrics_port",
                    f"prometheus-client was imported before {MULTIPROC_ENV} was set",
                )
            pc.disable_created_metrics()  # no ``_created`` series: noise on a dashboard
            _recorder = WorkerMetrics(registry)
        return _recorder


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


class MetricsServer:
    """A running ``/metrics`` endpoint (prometheus-client's HTTP server, in a thread).

    Attributes:
        port: The bound port (the one asked for, or the one the system chose for 0).
    """

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.port: int = int(server.server_address[1])

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve(port: int, host: str, registry: CollectorRegistry | None = None) -> MetricsServer:
    """Serve ``registry`` (default: prometheus-client's) on ``http://host:port/metrics``.

    Raises:
        ConfigError: The port cannot be bound (in use, or not allowed); the message names it.
    """
    pc = prometheus()
    try:
        server, thread = pc.start_http_server(
            port, addr=host, registry=registry if registry is not None else pc.REGISTRY
        )
    except OSError as exc:
        raise ConfigError("metrics_port", f"cannot serve metrics on {host}:{port}: {exc}") from exc
    out = MetricsServer(server, thread)
    logger.info("serving Prometheus metrics on http://%s:%d/metrics", host, out.port)
    return out


class MultiprocessExporter:
    """Serve the summed metrics of a group of processes (prometheus-client multiprocess mode).

    A fresh private directory collects the group's files; `child_env` tells children to write
    there. In ``adopt`` mode (a Celery worker's main process, whose pool forks) this process's
    own environment gets the variable, and this process records too.

    Args:
        port: Port of the ``/metrics`` endpoint.
        host: Address it binds.
        adopt: Set ``PROMETHEUS_MULTIPROC_DIR`` in this process (before prometheus-client
            is imported) and start recording here too.

    Raises:
        ConfigError: The port cannot be bound, or prometheus-client is missing.
    """

    def __init__(self, port: int, host: str, *, adopt: bool = False) -> None:
        self.path = tempfile.mkdtemp(prefix="crawlq-metrics-")
        if adopt:
            os.environ[MULTIPROC_ENV] = self.path
            start_recording()
        pc = prometheus()
        from prometheus_client import multiprocess

        registry = pc.CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.path)  # type: ignore[no-untyped-call]
        try:
            self.server = serve(port, host, registry)
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def child_env(self) -> dict[str, str]:
        """Variables for a child process: write metrics here, serve none of its own."""
        return {MULTIPROC_ENV: self.path, "CRAWLQ_METRICS_PORT": ""}

    def process_dead(self, pid: int) -> None:
        """Drop the live gauges of a child that exited (its counters stay in the sums)."""
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, self.path)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Stop serving and delete the directory."""
        self.server.close()
        shutil.rmtree(self.path, ignore_errors=True)
