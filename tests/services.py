"""Real services for tests: Redis from $CRAWLQ_TEST_REDIS_URL, else 127.0.0.1:6379 (db 9).

When the service does not answer, a private ``redis-server`` is started on a free port if the
binary exists; otherwise the tests that need it are skipped with the reason — except under
``CI=true``, where a missing service is a failure (CI must never skip them).
"""

from __future__ import annotations

import functools
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
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


class RedisCluster:
    """A private Redis Cluster: 3 masters and 3 replicas on spare loopback ports.

    Each node is a ``redis-server --cluster-enabled yes`` in its own temp dir, without
    persistence, its stdin and stdout redirected (an inherited pipe would hang the caller),
    stderr to a log in its dir; ``redis-cli --cluster create … --cluster-replicas 1`` joins
    them. `start` returns when every node says ``cluster_state:ok`` and every replica's
    ``master_link_status:up``. Nodes are stopped by PID (`stop_node` one of them, for
    failover tests; `cleanup` all). Use `need_cluster_binaries` first.
    """

    NODES = 6

    def __init__(self, *, node_timeout_ms: int = 2000) -> None:
        self.node_timeout_ms = node_timeout_ms
        self.ports = [free_port() for _ in range(self.NODES)]
        self.bus_ports = {port: free_port() for port in self.ports}
        """Each node's cluster bus port, given explicitly: the default (port + 10000) is past
        65535 for ports of the upper ephemeral range."""
        self.dir = Path(tempfile.mkdtemp(prefix="crawlq-cluster-"))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def url(self, port: int) -> str:
        """The ``redis://`` URL of one node (database 0: a cluster has no other)."""
        return f"redis://127.0.0.1:{port}/0"

    def start(self, timeout_s: float = 60.0) -> None:
        for port in self.ports:
            self._start_node(port)
        for port in self.ports:
            self._wait(functools.partial(self._answers, port), timeout_s, f"node {port}")
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        created = subprocess.run(
            ["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", "1",
             "--cluster-yes"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s,
            check=False,
        )  # fmt: skip
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout[-2000:]}")
        self._wait(self._ready, timeout_s, "cluster_state:ok and every replica linked")

    def _start_node(self, port: int) -> None:
        node_dir = self.dir / str(port)
        node_dir.mkdir()
        cmd = [
            "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(node_dir),
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-port", str(self.bus_ports[port]),
            "--cluster-node-timeout", str(self.node_timeout_ms),
            "--repl-diskless-sync-delay", "0", "--save", "", "--appendonly", "no",
        ]  # fmt: skip
        with (node_dir / "server.log").open("wb") as log:
            self.procs[port] = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
            )

    def _answers(self, port: int) -> bool:
        if self.procs[port].poll() is not None:
            log = (self.dir / str(port) / "server.log").read_text(errors="replace")
            raise RuntimeError(f"cluster node {port} exited: {log[-2000:]}")
        return redis_answers(self.url(port))

    def _ready(self) -> bool:
        import redis

        for port in self.live_ports():
            client = redis.Redis.from_url(self.url(port), socket_connect_timeout=1)
            try:
                if client.cluster("info")["cluster_state"] != "ok":
                    return False
                replication = client.info("replication")
                if replication["role"] == "slave" and replication["master_link_status"] != "up":
                    return False
            except (redis.RedisError, OSError, KeyError):
                return False
            finally:
                client.close()
        return True

    @staticmethod
    def _wait(ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"Redis Cluster not ready within {timeout_s} s: {what}")
            time.sleep(0.1)

    def live_ports(self) -> list[int]:
        return [p for p, proc in self.procs.items() if proc.poll() is None]

    def masters(self) -> dict[int, list[tuple[int, int]]]:
        """Each live master's port -> the slot ranges it serves (``CLUSTER SHARDS``-free)."""
        import redis

        client = redis.Redis.from_url(self.url(self.live_ports()[0]))
        try:
            out: dict[int, list[tuple[int, int]]] = {}
            for start, end, master, *_ in client.execute_command("CLUSTER SLOTS"):
                out.setdefault(int(master[1]), []).append((int(start), int(end)))
            return out
        finally:
            client.close()

    def slot_of(self, key: str) -> int:
        import redis

        client = redis.Redis.from_url(self.url(self.live_ports()[0]))
        try:
            return int(client.cluster("keyslot", key))
        finally:
            client.close()

    def owner_of(self, key: str) -> int:
        """The port of the master serving ``key``'s slot."""
        slot = self.slot_of(key)
        for port, ranges in self.masters().items():
            if any(start <= slot <= end for start, end in ranges):
                return port
        raise RuntimeError(f"no master serves slot {slot}")

    def stop_node(self, port: int, sig: int = signal.SIGTERM) -> None:
        proc = self.procs[port]
        if proc.poll() is None:
            os.kill(proc.pid, sig)
            proc.wait(timeout=10)

    def cleanup(self) -> None:
        for port in list(self.procs):
            self.stop_node(port)
        shutil.rmtree(self.dir, ignore_errors=True)


def need_cluster_binaries() -> None:
    """Skip (fail under CI) where ``redis-server`` or ``redis-cli`` is not installed."""
    for binary in ("redis-server", "redis-cli"):
        if shutil.which(binary) is None:
            need_service(f"no {binary} binary to start a private Redis Cluster")
