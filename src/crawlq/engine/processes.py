"""Run several ``crawlq worker`` processes on this machine and stop them together."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["WorkerProcesses"]

logger = logging.getLogger(__name__)


class WorkerProcesses:
    """``count`` child processes running ``python -m crawlq worker ARGS``.

    Each child is a complete worker of the same job (its own event loop, fetcher and
    connections), so a crash of one loses nothing: its leases expire and others take them.
    Each child is told this process's pid (the hidden ``--parent-pid``) and stops gracefully
    by itself when this process is gone, even killed with SIGKILL.

    Secrets never go on a child's command line (``/proc/PID/cmdline`` is readable by every
    user of the machine): a frontier or store URL travels in ``env`` (``CRAWLQ_FRONTIER``,
    ``CRAWLQ_STORE``), which only the child's owner can read.

    Each child writes what it did (`crawlq.engine.outcome.WorkerCounters.as_json`) to a file
    of its own in a private temporary directory when it ends (the hidden
    ``--counters-file``), which `reports` reads once they have all exited.

    Args:
        args: Arguments after ``crawlq worker`` (``--job``, ...): no secrets.
        count: Number of processes, at least 1.
        env: Variables to set in the children's environment, on top of this process's.
    """

    def __init__(
        self, args: Sequence[str], count: int, env: Mapping[str, str] | None = None
    ) -> None:
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        self.args = [
            sys.executable, "-m", "crawlq", "worker", *args, "--parent-pid", str(os.getpid())
        ]  # fmt: skip
        self.count = count
        self.env = dict(env or {})
        self.procs: list[subprocess.Popen[bytes]] = []
        self._reports: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> None:
        """Start the processes (their output goes to this process's stderr)."""
        env = {**os.environ, **self.env}
        self._reports = tempfile.TemporaryDirectory(prefix="crawlq-workers-")
        files = [os.path.join(self._reports.name, f"{i}.json") for i in range(self.count)]
        self.procs = [
            subprocess.Popen([*self.args, "--counters-file", file], env=env) for file in files
        ]
        logger.info("started %d worker processes: %s", self.count, [p.pid for p in self.procs])

    def reports(self) -> list[dict[str, Any]] | None:
        """What each child wrote when it ended (after `wait`), then forget the files.

        None when a child wrote nothing readable (killed, or ended by an error): the
        children's counts are then incomplete.
        """
        if self._reports is None:
            return None
        try:
            found = []
            for file in sorted(Path(self._reports.name).iterdir()):
                report = json.loads(file.read_text("utf-8"))
                if not isinstance(report, dict):
                    return None
                found.append(report)
            return found if len(found) == len(self.procs) else None
        except (OSError, ValueError):
            return None
        finally:
            self._reports.cleanup()
            self._reports = None

    def stop(self, *, force: bool = False) -> None:
        """Ask every running child to stop: SIGTERM (graceful), or SIGKILL with ``force``."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL if force else signal.SIGTERM)

    async def wait(self, stop_when: Callable[[], Awaitable[bool]] | None = None) -> list[int]:
        """Wait for every child to exit; returns their exit codes.

        Args:
            stop_when: Asked every 0.05 s while children run; once it answers True, the
                children are stopped gracefully (`stop`) and waited for.
        """
        while any(p.poll() is None for p in self.procs):
            await asyncio.sleep(0.2 if stop_when is None else 0.05)
            if stop_when is not None and await stop_when():
                logger.info("stopping the worker processes")
                self.stop()
                stop_when = None
        return [int(p.returncode) for p in self.procs]
