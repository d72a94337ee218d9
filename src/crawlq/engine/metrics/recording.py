"""Prometheus metrics: what workers count (`WorkerMetrics`), recorded once per process.

Names follow the Prometheus naming conventions (https://prometheus.io/docs/practices/naming/):
a ``crawlq_`` prefix, base units in the name (``_seconds``, ``_bytes``), ``_total`` on
counters. Labels hold bounded codes only (status class, reason codes, host names of the top
queues), never URLs.

Worker metrics (`WorkerMetrics`), updated by both engines when an outcome is written to the
store (so that, once a job is settled, the counters of all its workers add up to the store's
pages, dead letters and filtered records; a redirect back to its own URL whose revisit was
queued, a cookie wall's or one to the page's own fragment (`crawlq.engine.redirects`), is
counted as a hop, not a page, since the revisit's record replaces it: one page per URL):

| metric | type | labels | what |
|---|---|---|---|
| ``crawlq_pages_total`` | counter | ``status_class`` (``2xx``…) | pages stored |
| ``crawlq_cookie_wall_hops_total`` | counter | | redirects to their own URL fetched again |
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

The frontier gauges of a job: `crawlq.engine.metrics.frontier`; serving the metrics, alone
or summed over several processes: `crawlq.engine.metrics.serving`.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from crawlq.errors import ConfigError

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from crawlq.engine.outcome import Outcome

__all__ = [
    "LATENCY_BUCKETS_S",
    "MULTIPROC_ENV",
    "WorkerMetrics",
    "drop_labels",
    "prometheus",
    "recorder",
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
            "Redirects back to their own URL (a cookie wall's, or to the page's own fragment), "
            "fetched again.",
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
            revisited: Its `Outcome.revisit` was queued: its page record will be replaced
                by the revisit's, which is counted then; this one counts as a cookie-wall hop.
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
