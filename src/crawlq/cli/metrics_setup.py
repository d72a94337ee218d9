"""Turn Prometheus metrics on for a command that works (``crawl``, ``worker``) or supervises.

A process that works records its worker metrics (`crawlq.engine.metrics.start_recording`) and
serves them on ``--metrics-port``; a ``--processes P`` supervisor serves its children's
metrics summed (`crawlq.engine.metrics.MultiprocessExporter`), and each child, started with
``PROMETHEUS_MULTIPROC_DIR`` in its environment, records into that directory and serves
nothing itself.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from crawlq.settings import Settings

__all__ = ["supervisor_metrics", "worker_metrics"]


@contextlib.contextmanager
def worker_metrics(settings: Settings) -> Iterator[None]:
    """Record this process's worker metrics, and serve them when a port is given.

    Raises:
        ConfigError: The port cannot be bound, or prometheus-client is missing.
    """
    from crawlq.engine.metrics import MULTIPROC_ENV

    if os.environ.get(MULTIPROC_ENV):  # a supervisor's child: it serves the sums
        from crawlq.engine.metrics import start_recording

        start_recording()
        yield
        return
    if settings.metrics_port is None:
        yield
        return
    from crawlq.engine.metrics import serve, start_recording

    start_recording()
    server = serve(settings.metrics_port, settings.metrics_host)
    try:
        yield
    finally:
        server.close()


@contextlib.contextmanager
def supervisor_metrics(settings: Settings, env: dict[str, str]) -> Iterator[None]:
    """Serve the summed metrics of the children started with ``env`` (updated here).

    Raises:
        ConfigError: The port cannot be bound, or prometheus-client is missing.
    """
    if settings.metrics_port is None:
        yield
        return
    from crawlq.engine.metrics import MultiprocessExporter

    exporter = MultiprocessExporter(settings.metrics_port, settings.metrics_host)
    env.update(exporter.child_env())
    try:
        yield
    finally:
        exporter.close()
