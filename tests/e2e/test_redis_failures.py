"""End to end: Redis refusing writes (maxmemory) or losing a job (restart without persistence).

Each test runs its own private ``redis-server`` (stopped by PID) and real ``crawlq``
processes against a loopback site. A Redis at its ``maxmemory`` (``noeviction``) drains
itself: a seed says how many it queued and how many Redis refused; a worker goes on leasing,
storing and settling, and only the links it finds are refused (``frontier_full``, counted).
Permanent Redis errors stop a worker with one line and exit 1; a worker never writes into a
job it did not join.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from crawlq.frontier.redis import Keyspace
from crawlq.testing.static import generate_site, make_static_app
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
    assert f"queued {queued} of {len(urls)}; {len(urls) - queued} refused: Redis is full" in line
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


MAXMEMORY = 20 * 1024 * 1024
ROOM_BYTES = 450_000
"""Room left under ``maxmemory`` after the padding: the job and one seed chunk
(`crawlq.engine.seeding.SEED_CHUNK` URLs, about 200 KB) fit, the next chunk is refused."""

N_PAGES = 1000


@pytest.fixture
def full_redis() -> Iterator[RedisServer]:
    """A private Redis at 20 MB with ``noeviction`` and no persistence."""
    server = RedisServer(
        appendonly=False, args=("--maxmemory", "20mb", "--maxmemory-policy", "noeviction")
    )
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


def write_site(root: Path) -> list[str]:
    """Pages ``p<i>.html``, each linking to one page never seeded, ``n<i>.html``."""
    root.mkdir()
    paths = []
    for i in range(N_PAGES):
        (root / f"p{i}.html").write_text(
            f'<html><head><title>p{i}</title></head><body><a href="n{i}.html">next</a></body>'
            "</html>\n"
        )
        paths.append(f"/p{i}.html")
    return paths


def pad(client: redis.Redis) -> None:
    """Fill the Redis with padding strings up to about `ROOM_BYTES` under its maxmemory.

    Small strings: a big one (or APPEND, which allocates ahead) would overshoot.
    """
    n = 0
    while (gap := MAXMEMORY - int(client.info("memory")["used_memory"]) - ROOM_BYTES) > 0:
        client.set(f"padding:{n}", b"x" * min(gap, 30_000))
        n += 1
    assert MAXMEMORY - int(client.info("memory")["used_memory"]) < 2 * ROOM_BYTES


def seed_stdin(
    server: RedisServer, urls: list[str], store: Path
) -> subprocess.CompletedProcess[str]:
    """``crawlq seed -`` of ``urls`` into job ``full`` (no politeness delay, 8 at once)."""
    return subprocess.run(
        [
            sys.executable, "-m", "crawlq", "seed", "-", "--frontier", server.url, "--job",
            "full", "--store", str(store), "--delay", "0", "--host-concurrency", "8",
        ],
        input="\n".join(urls) + "\n", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_full_redis_drains_its_queue_and_refuses_only_new_links(
    full_redis: RedisServer, tmp_path: Path
) -> None:
    paths = write_site(tmp_path / "site")
    client = redis.Redis.from_url(full_redis.url)
    pad(client)
    store = tmp_path / "store.db"
    with ServerThread(make_static_app(tmp_path / "site")) as http:
        urls = [http.base_url + path for path in paths]
        seeded = seed_stdin(full_redis, urls, store)
        assert seeded.returncode == 1, seeded.stderr
        found = re.search(r"queued (\d+) of (\d+); (\d+) refused: Redis is full", seeded.stderr)
        assert found, seeded.stderr
        queued, given, refused = map(int, found.groups())
        assert given == N_PAGES and queued + refused == N_PAGES and 0 < queued < N_PAGES
        keys = Keyspace("full")
        assert int(client.hget(keys.stats, "queued") or 0) == queued  # the count is exact
        # Keep Redis full while the worker drains (as if other jobs held the memory freed):
        # no link can be pushed, so the counts below are exact.
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", str(used - 1_000_000))

        worker = run_crawlq(
            "worker", "--frontier", full_redis.url, "--job", "full", "--store", str(store),
            "--exit-when-done", timeout=240, check=False,
        )  # fmt: skip
    assert worker.returncode == 0, worker.stderr
    stored = stored_urls(store)
    assert max(stored.values()) == 1  # nothing twice
    assert set(stored) == set(urls[:queued])  # every page queued was stored, and only those
    stats = client.hgetall(keys.stats)
    assert [int(stats.get(name, 0)) for name in (b"queued", b"inflight", b"dead")] == [0, 0, 0]
    assert int(stats[b"done"]) == queued  # nothing lost
    counted = re.search(r"^links not followed: (\d+) .*frontier_full (\d+)", worker.stdout, re.M)
    assert counted, worker.stdout
    assert int(counted.group(1)) == int(counted.group(2)) == queued  # each page's one link
    assert client.scard(keys.seen) == queued  # none of them was pushed
    warnings = [line for line in worker.stderr.splitlines() if "Redis is full" in line]
    assert 1 <= len(warnings) <= 3, worker.stderr  # a state line, not one per refused push
    assert json.loads(run_crawlq("status", "--frontier", full_redis.url, "--job", "full",
                                 "--json").stdout)["queued"] == 0  # fmt: skip

    client.config_set("maxmemory", "0")  # room again: the same seed queues what was refused
    again = seed_stdin(full_redis, urls, store)
    assert again.returncode == 0, again.stderr
    assert f"queued {refused} new of {N_PAGES}" in again.stdout, again.stdout
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
