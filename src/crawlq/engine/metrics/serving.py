"""Serving Prometheus metrics over HTTP: one process's (`serve`), or a group's summed.

Several processes: a ``--processes P`` supervisor (or a Celery worker's main process) serves
its children's metrics summed, with prometheus-client's multiprocess mode: the children
write to files in a private directory named by ``PROMETHEUS_MULTIPROC_DIR``
(`MultiprocessExporter`). prometheus-client is the ``metrics`` extra
(``pip install 'crawlq[metrics]'``) and is imported only when metrics are turned on.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from typing import TYPE_CHECKING, Any

from crawlq.engine.metrics.recording import MULTIPROC_ENV, prometheus, start_recording
from crawlq.errors import ConfigError

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = ["MetricsServer", "MultiprocessExporter", "serve"]

logger = logging.getLogger(__name__)


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
