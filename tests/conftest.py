"""Shared fixtures: the site to crawl end to end, and how to run the ``crawlq`` command."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawlq.cli.terminal import reset_logging
from crawlq.testing import FaultState, RequestLog, fault_state, make_fault_app
from crawlq.testing.static import generate_site, unpack_corpus
from crawlq.urls import host_key
from tests.s3_server import MotoServer
from tests.services import (
    DEFAULT_REDIS_URL,
    RedisCluster,
    RedisServer,
    need_cluster_binaries,
    need_service,
    redis_answers,
)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "postgresql-15-docs.tar.gz"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


END_TO_END_DIRS = (REPO / "tests" / "e2e", REPO / "tests" / "celery_engine")
"""Every test under these runs ``crawlq`` or ``celery worker`` processes: all are ``e2e``."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of `END_TO_END_DIRS` ``e2e``: ``-m "not e2e"`` is the fast lane
    (CONTRIBUTING.md), in-process tests against the real services."""
    for item in items:
        if any(item.path.is_relative_to(d) for d in END_TO_END_DIRS):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterator[None]:
    """Undo any `crawlq.cli.terminal.configure_logging` a command run in-process made.

    It stops crawlq's records at the ``crawlq`` logger, so a later test of the same process
    (an xdist worker runs tests in any order) whose ``caplog`` waits for one would wait
    forever.
    """
    yield
    reset_logging()


def corpus_tarball() -> Path | None:
    """The real corpus: $CRAWLQ_TEST_CORPUS, else ../shared/corpora beside the repo."""
    named = os.environ.get("CRAWLQ_TEST_CORPUS")
    if named:
        path = Path(named)
        if not path.is_file():
            raise FileNotFoundError(f"CRAWLQ_TEST_CORPUS={named} does not exist")
        return path
    return DEFAULT_CORPUS if DEFAULT_CORPUS.is_file() else None


@pytest.fixture(scope="session")
def site_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory holding a whole website with index.html: the PostgreSQL manual when the
    corpus is present (always in CI), else a generated site of the same shape."""
    tmp = tmp_path_factory.mktemp("site")
    tarball = corpus_tarball()
    if tarball is not None:
        yield unpack_corpus(tarball, tmp)
    elif os.environ.get("CI") == "true":
        raise RuntimeError(f"CI must crawl the real corpus; not found at {DEFAULT_CORPUS}")
    else:
        yield generate_site(tmp, n_pages=600)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis URL for tests: $CRAWLQ_TEST_REDIS_URL, the machine's server, or a private one."""
    url = os.environ.get("CRAWLQ_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    if redis_answers(url):
        yield url
        return
    if shutil.which("redis-server") is None:
        need_service(f"no Redis at {url} and no redis-server binary to start one")
    server = RedisServer(appendonly=False)
    server.start()
    try:
        yield server.url
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisCluster]:
    """A private Redis Cluster of 3 masters and 3 replicas (`tests.services.RedisCluster`).

    One per test module, so a module that stops nodes (failover) leaves the next one a whole
    cluster. Skipped without ``redis-server``/``redis-cli``, failed under ``CI=true``.
    """
    need_cluster_binaries()
    cluster = RedisCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.cleanup()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A real local S3-compatible server (moto's server mode), stopped by PID afterwards."""
    server = MotoServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


@pytest.fixture
def s3_bucket(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A bucket of this test's own on `moto_server`, this process's AWS variables set to it."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in moto_server.env().items():
        monkeypatch.setenv(key, value)
    name = f"crawlq-test-{uuid.uuid4().hex[:12]}"
    client = moto_server.client()
    client.create_bucket(Bucket=name)
    yield name
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
        for obj in page.get("Contents", ()):
            client.delete_object(Bucket=name, Key=obj["Key"])
    client.delete_bucket(Bucket=name)


@pytest.fixture
def job(redis_url: str) -> Iterator[str]:
    """A job name of its own on the test Redis; every key of the job is deleted afterwards."""
    import redis

    from crawlq.frontier.redis import Keyspace

    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=Keyspace(name).pattern()):
        client.unlink(key)
    client.close()


def postgres_answers(url: str) -> str | None:
    """Why PostgreSQL at ``url`` cannot be used for tests, or None when it answers."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'crawlq[postgres]')"
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return " ".join(str(exc).split())
    return None


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A PostgreSQL URL for tests: $CRAWLQ_TEST_POSTGRES_URL, else the machine's server.

    Tests create a schema of their own in it and drop it afterwards.
    """
    url = os.environ.get("CRAWLQ_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    problem = postgres_answers(url)
    if problem is not None:
        shown = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1@", url)  # no password in the report
        need_service(f"no PostgreSQL at {shown}: {problem}")
    return url


@contextlib.asynccontextmanager
async def pg_schema(url: str) -> AsyncIterator[str]:
    """A fresh PostgreSQL schema name (``crawlq_test_<hex>``), dropped with its tables on exit.

    The schema itself is created by whoever uses it first (a store creates its own).
    """
    import psycopg
    from psycopg import sql

    schema = f"crawlq_test_{secrets.token_hex(6)}"
    try:
        yield schema
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            await conn.execute(drop)


def run_crawlq(
    *args: str,
    timeout: float = 120,
    check: bool = True,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m crawlq ARGS`` and return the finished process (text output).

    ``env`` is added to this process's environment; ``cwd`` is the working directory.
    """
    proc = subprocess.run(
        [sys.executable, "-m", "crawlq", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else {**os.environ, **env},
        cwd=cwd,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"crawlq {' '.join(args)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


# -- the loopback fault server (crawlq.testing), for the fetch and engine tests -------------


@pytest.fixture
def log() -> RequestLog:
    return RequestLog()


@pytest.fixture
def app(log: RequestLog) -> web.Application:
    return make_fault_app(log)


@pytest.fixture
def state(app: web.Application) -> FaultState:
    return fault_state(app)


@pytest.fixture
async def base(app: web.Application) -> AsyncIterator[str]:
    """``http://127.0.0.1:PORT`` of the fault app, served in the test's event loop."""
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url("")).rstrip("/")


@pytest.fixture
def host(base: str) -> str:
    """The fault server's politeness key, as the request log records it."""
    return host_key(base)
