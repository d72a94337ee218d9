"""Real services for tests: Redis from $CRAWLQ_TEST_REDIS_URL, else 127.0.0.1:6379 (db 9).

When the service does not answer, a private ``redis-server`` is started on a free port if the
binary exists; otherwise the tests that need it are skipped with the reason — except under
``CI=true``, where a missing service is a failure (CI must never skip them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/9"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_answers(url: str) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return False


class RedisServer:
    """A private redis-server on a spare loopback port, in its own temp dir (stopped by PID)."""

    def __init__(self, *, appendonly: bool = True, port: int | None = None) -> None:
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="crawlq-redis-"))
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        cmd = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.dir), "--save", "",
            "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "always",
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not redis_answers(self.url):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def need_service(reason: str) -> None:
    """Skip locally, fail under CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must not skip service tests)")
    pytest.skip(reason)
