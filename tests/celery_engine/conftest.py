"""Fixtures for the Celery engine: brokers, real ``celery worker`` processes, job cleanup.

Brokers come from the environment: ``CRAWLQ_TEST_CELERY_REDIS_URL`` (default: a private
``redis-server`` per test process, see `celery_redis_url`) and ``CRAWLQ_TEST_AMQP_URL``
(default ``amqp://guest:guest@127.0.0.1:5672//``). Every test uses a queue and a job of its
own and deletes them afterwards. A broker that does not answer skips the test with the
reason, and fails it under ``CI=true`` (`tests.services.need_service`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest
import redis

from crawlq.frontier.redis import Keyspace
from tests.conftest import run_crawlq
from tests.services import RedisServer, need_service, redis_answers

DEFAULT_CELERY_REDIS_URL = "redis://127.0.0.1:6379/10"
DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672//"


@pytest.fixture(scope="session")
def celery_redis_url() -> Iterator[str]:
    """The Redis broker of the Celery tests: $CRAWLQ_TEST_CELERY_REDIS_URL, else a private
    ``redis-server`` of this test process (each pytest-xdist worker has its own), else
    `DEFAULT_CELERY_REDIS_URL` when there is no binary.

    Not a shared DB by default: kombu keeps one ``unacked`` index per Redis DB, and every
    worker restores from it the messages older than *its own* visibility timeout, whatever
    their queue. A test's worker at ``visibility_timeout_s = 2`` would hand another test's
    running tasks out again (two tests at once, or two runs on one machine).
    """
    named = os.environ.get("CRAWLQ_TEST_CELERY_REDIS_URL")
    if named is None and shutil.which("redis-server") is not None:
        server = RedisServer(appendonly=False)
        server.start()
        try:
            yield server.url
        finally:
            server.cleanup()
        return
    url = named or DEFAULT_CELERY_REDIS_URL
    if not redis_answers(url):
        need_service(f"no Redis broker at {url} for the Celery tests")
    yield url


def _amqp_problem(url: str) -> str | None:
    from kombu.connection import Connection

    try:
        with Connection(url, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:  # any failure to connect: say why
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.fixture(scope="session")
def amqp_url() -> str:
    url = os.environ.get("CRAWLQ_TEST_AMQP_URL", DEFAULT_AMQP_URL)
    problem = _amqp_problem(url)
    if problem is not None:
        need_service(f"no RabbitMQ at {url.split('@')[-1]}: {problem}")
    return url


@pytest.fixture
def queue() -> str:
    """A Celery queue name of its own."""
    return f"crawlq-test-{uuid.uuid4().hex[:10]}"


def delete_redis_queue(broker_url: str, queue: str) -> None:
    """Delete a queue's lists (every priority step) and its binding on a Redis broker."""
    client = redis.Redis.from_url(broker_url)
    try:
        for key in client.scan_iter(match=f"{queue}*"):
            client.unlink(key)
        for key in client.scan_iter(match=f"_kombu.binding*.{queue}"):
            client.unlink(key)
        client.zrem("_kombu.binding_deadlines", queue, "celery.pidbox")  # pidbox: remote control
    finally:
        client.close()


def delete_amqp_queue(amqp_url: str, queue: str) -> None:
    """Delete a queue and its exchange on RabbitMQ."""
    from kombu.connection import Connection

    with Connection(amqp_url) as conn:
        channel = conn.channel()
        try:
            channel.queue_delete(queue)
            channel.exchange_delete(queue)
        finally:
            channel.close()


@pytest.fixture
def broker_cleanup() -> Iterator[Callable[[str, str], None]]:
    """Register ``(broker_url, queue)`` pairs to delete at the end of the test."""
    registered: list[tuple[str, str]] = []
    yield lambda url, q: registered.append((url, q))
    for url, q in registered:
        if url.startswith("amqp"):
            delete_amqp_queue(url, q)
        else:
            delete_redis_queue(url, q)


@dataclass
class CeleryWorker:
    """A real ``celery -A crawlq.celery worker`` process in a session of its own."""

    env: dict[str, str]
    log_path: Path
    args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> CeleryWorker:
        cmd = [
            sys.executable, "-m", "celery", "-A", "crawlq.celery", "worker",
            "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "-Q", self.env["CRAWLQ_CELERY_QUEUE"], *self.args,
        ]  # fmt: skip
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        return self

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes (its own process group)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def log_tail(self, n: int = 40) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


@pytest.fixture
def workers(
    tmp_path: Path, broker_cleanup: Callable[[str, str], None]
) -> Iterator[Callable[..., CeleryWorker]]:
    """Start Celery workers: ``workers(broker, frontier, queue, *args, **env)``; all stopped
    (their process groups) at the end of the test, before `broker_cleanup` deletes the
    queues (a live worker would declare its queue again).

    Each worker names its store itself, as an operator's would (a job's SQLite path is never
    taken from Redis): ``CRAWLQ_STORE`` is the test's ``tmp_path / "store.db"`` unless given.
    """
    started: list[CeleryWorker] = []

    def start(broker: str, frontier: str, queue: str, *args: str, **env: str) -> CeleryWorker:
        full = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")},
            "CRAWLQ_BROKER_URL": broker,
            "CRAWLQ_FRONTIER": frontier,
            "CRAWLQ_CELERY_QUEUE": queue,
            "CRAWLQ_STORE": str(tmp_path / "store.db"),
            **env,
        }
        log = tmp_path / f"worker-{len(started)}.log"
        worker = CeleryWorker(full, log, list(args)).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@dataclass
class CeleryJob:
    """One test's Celery job: its broker, frontier, job name, queue and store, with the
    ``workers`` fixture to start workers on it (from `celery_job`)."""

    broker: str
    frontier: str
    job: str
    queue: str
    store: Path
    start_worker: Callable[..., CeleryWorker]

    def worker(self, *args: str, **env: str) -> CeleryWorker:
        """A Celery worker on this job's broker, frontier and queue (`workers`)."""
        return self.start_worker(self.broker, self.frontier, self.queue, *args, **env)

    def crawl(
        self, seed: str | list[str], *args: str, job: str | None = None, timeout: float = 110
    ) -> subprocess.CompletedProcess[str]:
        """``crawlq crawl --engine celery`` into this job's store (`crawl_celery`); ``job``:
        another job name on the same broker, frontier, queue and store."""
        return crawl_celery(
            seed, self.broker, self.frontier, job or self.job, self.queue, self.store, *args,
            timeout=timeout,
        )  # fmt: skip


@pytest.fixture
def celery_job(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: Callable[..., CeleryWorker],
    broker_cleanup: Callable[[str, str], None],
) -> CeleryJob:
    """A `CeleryJob` on the Redis broker; its queue is deleted at the end of the test."""
    broker_cleanup(celery_redis_url, queue)
    return CeleryJob(celery_redis_url, redis_url, job, queue, tmp_path / "store.db", workers)


def crawl_celery(
    seed: str | list[str],
    broker: str,
    frontier: str,
    job: str,
    queue: str,
    store: Path,
    *args: str,
    timeout: float = 110,
) -> subprocess.CompletedProcess[str]:
    """Run ``crawlq crawl --engine celery`` until the job is done."""
    seeds = [seed] if isinstance(seed, str) else seed
    cmd = [
        sys.executable, "-m", "crawlq", "crawl", *seeds, "--engine", "celery",
        "--broker", broker, "--frontier", frontier, "--job", job, "--store", str(store),
        "-q", *args,
    ]  # fmt: skip
    env = {**os.environ, "CRAWLQ_CELERY_QUEUE": queue}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(
            f"crawl exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


def crawl_process(
    seed: str, broker: str, frontier: str, job: str, queue: str, store: Path, *args: str
) -> subprocess.Popen[str]:
    """Start ``crawlq crawl --engine celery`` in the background."""
    cmd = [
        sys.executable, "-m", "crawlq", "crawl", seed, "--engine", "celery", "--broker", broker,
        "--frontier", frontier, "--job", job, "--store", str(store), "-q", *args,
    ]  # fmt: skip
    env = {**os.environ, "CRAWLQ_CELERY_QUEUE": queue}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stored_pages(store: Path) -> list[dict[str, object]]:
    out = run_crawlq("export", "--store", str(store), "--what", "pages").stdout
    return [json.loads(line) for line in out.splitlines() if line]


def stored_urls(store: Path) -> Counter[str]:
    return Counter(str(p["url"]) for p in stored_pages(store))


def stored_dead(store: Path) -> list[dict[str, object]]:
    out = run_crawlq("export", "--store", str(store), "--what", "dead").stdout
    return [json.loads(line) for line in out.splitlines() if line]


def stored_count(store: Path) -> int:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("SELECT count(*) FROM pages").fetchone()[0])
    except sqlite3.Error:
        return 0


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def job_counts(redis_url: str, job: str) -> dict[str, int]:
    keys = Keyspace(job)
    client = redis.Redis.from_url(redis_url)
    try:
        stats = {
            k.decode(): int(v)
            for k, v in cast("dict[bytes, bytes]", client.hgetall(keys.stats)).items()
        }
        stats["pending"] = int(client.hlen(keys.pending))
    finally:
        client.close()
    return stats


def redis_broker_state(broker_url: str, queue: str) -> dict[str, object]:
    """What a Redis broker holds for ``queue`` (for failure messages)."""
    client = redis.Redis.from_url(broker_url)
    try:
        return {
            "queued": sum(int(client.llen(k)) for k in client.scan_iter(match=f"{queue}*")),
            "unacked": int(client.hlen("unacked")),
            "unacked_mutex_ttl": int(client.ttl("unacked_mutex")),
        }
    finally:
        client.close()
