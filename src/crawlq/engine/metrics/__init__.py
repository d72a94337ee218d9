"""Prometheus metrics of crawlq: what workers count, the frontier gauges of a job, serving.

Names follow the Prometheus naming conventions (https://prometheus.io/docs/practices/naming/):
a ``crawlq_`` prefix, base units in the name (``_seconds``, ``_bytes``), ``_total`` on
counters. Labels hold bounded codes only (status class, reason codes, host names of the top
queues), never URLs. The worker metrics and their table: `crawlq.engine.metrics.recording`;
the frontier gauges: `crawlq.engine.metrics.frontier`; the HTTP exporters, alone or summed
over several processes: `crawlq.engine.metrics.serving`. prometheus-client is the ``metrics``
extra (``pip install 'crawlq[metrics]'``) and is imported only when metrics are turned on.
"""

from __future__ import annotations

from crawlq.engine.metrics.frontier import FrontierCollector
from crawlq.engine.metrics.recording import (
    MULTIPROC_ENV,
    WorkerMetrics,
    recorder,
    start_recording,
    status_class,
)
from crawlq.engine.metrics.serving import MetricsServer, MultiprocessExporter, serve

__all__ = [
    "MULTIPROC_ENV",
    "FrontierCollector",
    "MetricsServer",
    "MultiprocessExporter",
    "WorkerMetrics",
    "recorder",
    "serve",
    "start_recording",
    "status_class",
]
