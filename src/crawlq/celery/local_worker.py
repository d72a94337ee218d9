"""The local Celery worker of ``crawlq crawl --engine celery --processes P`` (`LocalWorker`).

Stopping it is bounded. A task runs up to ``celery_batch`` URLs and, when its own fetches
hold the host's slots, fetches them one after another for up to ``timeout_s`` (30 s by
default); Celery's warm shutdown (SIGTERM) waits for running tasks, so it alone could take
that long. The worker gets SIGTERM first (it takes no new task, and its prefetched ones go
back to the queue), then, after `STOP_GRACE_S`, SIGQUIT: Celery's cold shutdown cancels the
running tasks, and their messages go back to the queue (``acks_late``,
``reject_on_worker_lost``). Nothing is lost: a cancelled task settled none of its URLs (they
stay pending in the job), and its repeat is absorbed by the store's upserts. Only if the
worker still runs `KILL_AFTER_S` later is its process group killed; its unacknowledged tasks
then come back after the broker's visibility timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time

from crawlq.settings import Settings
from crawlq.settings.handoff import own_env

__all__ = ["KILL_AFTER_S", "STOP_GRACE_S", "LocalWorker"]

logger = logging.getLogger(__name__)

STOP_GRACE_S = 2.0
"""Seconds the local worker has, after the first stop, to finish its running tasks (Celery's
warm shutdown) before they are cancelled and sent back to the queue (cold shutdown)."""

KILL_AFTER_S = 15.0
"""Seconds after the cold shutdown at which a local worker still running is killed."""


class LocalWorker:
    """One ``celery worker`` process started by this command, and its bounded stop.

    Args:
        processes: Its pool processes.
        loglevel: Its log level.
    """

    def __init__(self, processes: int, loglevel: str) -> None:
        self.processes = processes
        self.loglevel = loglevel
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping_since: float | None = None  # when the worker got SIGTERM
        self._cold = False  # the worker got SIGQUIT (a second one would be a hard kill)

    def exit_code(self) -> int | None:
        """The worker's exit status once it has exited on its own, else None."""
        if self._process is None:
            return None
        return self._process.poll()

    def stop(self, *, force: bool = False) -> None:
        """Warm shutdown now (SIGTERM), or with ``force`` cold shutdown (SIGQUIT) now."""
        worker = self._process
        if worker is None or worker.poll() is not None:
            return
        if force and not self._cold:
            self._cold = True
            worker.send_signal(signal.SIGQUIT)
        elif self._stopping_since is None:
            self._stopping_since = time.monotonic()
            worker.send_signal(signal.SIGTERM)

    def start(self, settings: Settings) -> None:
        """Start the worker on the job's broker and queue, with this command's own values."""
        env = {
            **os.environ,
            "CRAWLQ_BROKER_URL": settings.broker_url or "",
            "CRAWLQ_FRONTIER": settings.frontier or "",
            "CRAWLQ_CELERY_QUEUE": settings.celery_queue,
        }
        # The job keeps no store password, and a worker takes no local path from it: the
        # worker gets the store this command crawls into (its own option, or the default it
        # planned, made absolute), as `crawl --processes` gives its native children.
        env["CRAWLQ_STORE"] = settings.store
        env.update(own_env(settings))  # code and per-process settings: this command's own
        if settings.metrics_port is not None:  # the worker does the work: it serves metrics
            env["CRAWLQ_METRICS_PORT"] = str(settings.metrics_port)
            env["CRAWLQ_METRICS_HOST"] = settings.metrics_host
        cmd = [
            sys.executable, "-m", "celery", "-A", "crawlq.celery", "worker",
            "--concurrency", str(self.processes), "--loglevel", self.loglevel,
            "-Q", settings.celery_queue, "--without-gossip", "--without-mingle",
            "--without-heartbeat",
        ]  # fmt: skip
        # a session of its own: only this process signals it (a terminal's Ctrl-C reaches the
        # whole foreground group), and it can be killed with its pool processes
        self._process = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True
        )

    async def shutdown(self) -> None:
        """Stop the worker: warm, cold after `STOP_GRACE_S`, killed `KILL_AFTER_S` later.

        Waits without blocking the event loop, so a second Ctrl-C (`stop` with ``force``) is
        handled meanwhile.
        """
        worker = self._process
        if worker is None:
            return
        if self._stopping_since is None:
            self._stopping_since = time.monotonic()
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)  # warm: takes no new task
        cold_at = self._stopping_since + STOP_GRACE_S
        kill_at = cold_at + KILL_AFTER_S
        while worker.poll() is None:
            now = time.monotonic()
            if now >= kill_at:
                logger.warning("the local celery worker did not stop: killing it")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.pid, signal.SIGKILL)
                break
            if now >= cold_at and not self._cold:
                self._cold = True
                logger.info("cancelling the local celery worker's running tasks (requeued)")
                worker.send_signal(signal.SIGQUIT)
            await asyncio.sleep(0.05)
        await asyncio.to_thread(worker.wait)
        self._process = None
