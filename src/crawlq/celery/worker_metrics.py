"""A Celery worker's Prometheus metrics, summed over its pool processes.

`serve_worker_metrics` hooks Celery's worker signals: the worker's main process serves the
metrics of itself and its pool (`crawlq.engine.metrics.MultiprocessExporter`).
"""

from __future__ import annotations

import os
from typing import Any

from celery import signals

from crawlq.settings import Settings

__all__ = ["serve_worker_metrics"]


def serve_worker_metrics(settings: Settings) -> None:
    """Serve the worker metrics of a Celery worker and its pool on ``settings.metrics_port``.

    When the worker starts (``worker_init``, in its main process, before the pool forks),
    the main process serves the summed metrics of itself and its pool processes
    (`crawlq.engine.metrics.MultiprocessExporter`, which records here too: the forked pool
    processes inherit that and write files of their own); a pool process that exits has
    its live gauges dropped.
    """
    exporters: list[Any] = []

    def start(**_: Any) -> None:
        from crawlq.engine.metrics import MultiprocessExporter

        port, host = settings.metrics_port, settings.metrics_host
        assert port is not None
        exporters.append(MultiprocessExporter(port, host, adopt=True))

    def process_gone(**_: Any) -> None:
        for exporter in exporters:
            exporter.process_dead(os.getpid())

    def stop(**_: Any) -> None:
        while exporters:
            exporters.pop().close()

    signals.worker_init.connect(start, weak=False)
    signals.worker_process_shutdown.connect(process_gone, weak=False)
    signals.worker_shutdown.connect(stop, weak=False)
