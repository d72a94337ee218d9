"""End to end: Redis refusing writes (maxmemory) or losing a job (restart without persistence).

Each test runs its own private ``redis-server`` (stopped by PID) and real ``crawlq``
processes against a loopback site. Permanent Redis errors stop a worker with one line and
exit 1; a worker never writes into a job it did not join.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from crawlq.frontier.redis import Keyspace
from crawlq.testing.site import generate_site
from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.e2e.test_distributed import stored_count, stored_urls
from tests.services import RedisServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    """A private redis-server without persistence (a restart empties it)."""
    server = RedisServer(appendonly=False)
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


def client_of(server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(server.url)


def worker(url: str, job: str, *extra: str, store: Path) -> subprocess.Popen[str]:
    """A ``crawlq worker``; it names the job's store itself (never taken from Redis)."""
    cmd = [sys.executable, "-m", "crawlq", "worker", "--frontier", url, "--job", job, "-q"]
    cmd += ["--store", str(store)]
    return subprocess.Popen(
        [*cmd, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def finish(procs: list[subprocess.Popen[str]], timeout_s: float) -> list[tuple[int, str]]:
    """Wait for each process (all within ``timeout_s``); return (exit code, stderr) each."""
    deadline = time.monotonic() + timeout_s
    out = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            out.append((proc.returncode, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


def wait_for_pages(store: Path, n: int, procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + 60
    while stored_count(store) < n:
        assert time.monotonic() < deadline, "the crawl did not start"
        assert all(p.poll() is None for p in procs), "a worker exited early"
        time.sleep(0.02)


def test_seed_into_a_full_redis_reports_the_count_and_resumes(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    client = client_of(private_redis)
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", str(int(client.info("memory")["used_memory"]) + 2_000_000))
    urls = [f"http://127.0.0.1:9/page/{n}" for n in range(20_000)]
    stdin = "\n".join(urls) + "\n"
    args = ["seed", "-", "--frontier", private_redis.url, "--job", "full"]
    args += ["--store", str(tmp_path / "s.db")]
    proc = subprocess.run(
        [sys.executable, "-m", "crawlq", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr  # one clear line
    line = lines[0]
    assert "out of memory" in line and "maxmemory" in line, line
    assert "re-run the same command to resume" in line, line
    queued = int(line.split("queued ", 1)[1].split(" of ", 1)[0])
    assert f"queued {queued} of {len(urls)} before Redis refused" in line
    assert 0 < queued < len(urls)
    stats = client.hgetall(Keyspace("full").stats)
    assert int(stats[b"seen"]) == int(stats[b"queued"]) == queued  # the count is exact

    client.config_set("maxmemory", "0")
    again = subprocess.run(
        [sys.executable, "-m", "crawlq", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert f"queued {len(urls) - queued} new of {len(urls)}" in again.stdout
    stats = client.hgetall(Keyspace("full").stats)
    assert int(stats[b"seen"]) == int(stats[b"queued"]) == len(urls)  # each URL once
    assert client.scard(Keyspace("full").seen) == len(urls)
    client.close()


def test_worker_stops_on_a_full_redis_keeping_its_results_and_the_job_resumes(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=60)
    client = client_of(private_redis)
    with ServerThread(make_static_app(root)) as http:
        store = tmp_path / "store.db"
        run_crawlq(
            "seed", http.base_url + "/index.html", "--frontier", private_redis.url,
            "--job", "oom", "--store", str(store), "--delay", "0.1", "--host-concurrency", "1",
            env={"CRAWLQ_VISIBILITY_TIMEOUT_S": "3"},
        )  # fmt: skip
        procs = [worker(private_redis.url, "oom", "--exit-when-done", store=store)]
        wait_for_pages(store, 10, procs)
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1")  # every write refused from now on
        [(code, err)] = finish(procs, 15)
        assert code == 1, err
        assert "out of memory" in err and "maxmemory" in err, err
        assert "frontier unavailable" not in err
        stored = stored_count(store)
        assert stored >= 10

        client.config_set("maxmemory", "0")
        [(code, err)] = finish(
            [worker(private_redis.url, "oom", "--exit-when-done", store=store)], 120
        )
        assert code == 0, err
    urls = stored_urls(store)
    assert len(urls) == 60  # nothing lost
    assert max(urls.values()) == 1
    client.close()


def _two_workers_on_a_slow_crawl(
    server: RedisServer, tmp_path: Path, http: ServerThread
) -> tuple[Path, list[subprocess.Popen[str]]]:
    store = tmp_path / "store.db"
    run_crawlq(
        "seed", http.base_url + "/index.html", "--frontier", server.url, "--job", "ghost",
        "--store", str(store), "--delay", "0.1", "--host-concurrency", "1",
    )  # fmt: skip
    procs = [worker(server.url, "ghost", "--exit-when-done", store=store) for _ in range(2)]
    wait_for_pages(store, 8, procs)
    return store, procs


def _assert_clean_stop(results: list[tuple[int, str]]) -> None:
    for code, err in results:
        assert code == 1, err
        assert "job 'ghost' is gone" in err, err
        assert "without persistence" in err and "appendonly" in err, err
        assert "frontier unavailable" not in err


def test_a_restart_without_persistence_stops_the_workers_and_writes_nothing(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=200)
    with ServerThread(make_static_app(root)) as http:
        store, procs = _two_workers_on_a_slow_crawl(private_redis, tmp_path, http)
        private_redis.stop()
        private_redis.start()  # same port, empty: no persistence
        _assert_clean_stop(finish(procs, 15))
        pages = stored_count(store)
        assert 8 <= pages < 200
    client = client_of(private_redis)
    assert client.dbsize() == 0, client.keys("*")  # nothing written into the empty Redis
    client.close()


def test_deleting_the_job_mid_crawl_stops_the_workers_the_same_way(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=200)
    client = client_of(private_redis)
    with ServerThread(make_static_app(root)) as http:
        _, procs = _two_workers_on_a_slow_crawl(private_redis, tmp_path, http)
        client.flushdb()
        _assert_clean_stop(finish(procs, 15))
    assert client.dbsize() == 0, client.keys("*")
    client.close()


def test_a_job_seeded_again_after_a_restart_is_not_joined_by_the_old_workers(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=200)
    with ServerThread(make_static_app(root)) as http:
        store, procs = _two_workers_on_a_slow_crawl(private_redis, tmp_path, http)
        private_redis.stop()
        private_redis.start()
        run_crawlq(
            "seed", "http://127.0.0.1:9/new", "--frontier", private_redis.url, "--job", "ghost",
            "--store", str(store),
        )  # fmt: skip
        results = finish(procs, 15)
    for code, err in results:
        assert code == 1, err
        assert "job 'ghost'" in err and ("is gone" in err or "was replaced" in err), err
    client = client_of(private_redis)
    stats = client.hgetall(Keyspace("ghost").stats)
    assert int(stats[b"seen"]) == 1  # the new job holds its own seed only
    client.close()
