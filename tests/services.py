"""Real services for tests: Redis from $CRAWLQ_TEST_REDIS_URL, else 127.0.0.1:6379 (db 9).

When the service does not answer, a private ``redis-server`` is started on a free port if the
binary exists; otherwise the tests that need it are skipped with the reason — except under
``CI=true``, where a missing service is a failure (CI must never skip them).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
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

    def __init__(
        self, *, appendonly: bool = True, port: int | None = None, args: tuple[str, ...] = ()
    ) -> None:
        self.port = port or free_port()
        self.args = args
        """More ``redis-server`` options (``--maxmemory 20mb`` …)."""
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
            *self.args,
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


class PrivatePostgres:
    """``initdb`` + ``pg_ctl`` into a temp dir, listening on a spare loopback port.

    Runs as the ``postgres`` user when the tests run as root (initdb refuses root).
    """

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        bindir = Path(found[-1]).parent if found else None
        if bindir is None and shutil.which("initdb"):
            bindir = Path(shutil.which("initdb") or "").parent
        if bindir is None or not (bindir / "pg_ctl").exists():
            need_service("no initdb/pg_ctl to start a private PostgreSQL")
        assert bindir is not None
        self.bindir = bindir
        self.prefix: list[str] = []
        owner = None
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                need_service("running as root and there is no postgres user for initdb")
            if shutil.which("runuser") is None:
                need_service("running as root and there is no runuser to run initdb as postgres")
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="crawlq-pg-"))
        self.data = self.dir / "data"
        if owner is not None:
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self.prefix, str(self.bindir / tool), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} exited {done.returncode}: {done.stderr}")

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off"
        log = str(self.dir / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def cleanup(self) -> None:
        pid_file = self.data / "postmaster.pid"
        try:
            self.stop("immediate")
        except (RuntimeError, subprocess.TimeoutExpired):
            if pid_file.exists():  # pg_ctl failed: end the postmaster by its PID
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
            raise
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
