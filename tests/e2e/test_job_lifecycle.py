"""Jobs have a lifecycle: `crawlq jobs`, `crawlq job pause|resume|delete|expire` (Redis).

Workers are real ``crawlq worker`` processes, the site a loopback server with a request log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from crawlq.frontier.redis import Keyspace
from crawlq.testing.request_log import RequestLog
from crawlq.testing.static import generate_site, make_static_app
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.e2e.test_distributed import stored_urls, worker_proc

pytestmark = pytest.mark.e2e


def _keys(redis_url: str, job: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        return list(client.scan_iter(match=Keyspace(job).pattern(), count=1000))
    finally:
        client.close()


def _wait_for(check: Callable[[], bool], what: str, bound_s: float = 60) -> None:
    """Wait until ``check()`` holds; the bound is generous (a loaded machine), not asserted."""
    give_up = time.monotonic() + bound_s
    while not check():
        if time.monotonic() > give_up:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


def _live_workers(redis_url: str, job: str) -> int:
    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.zcard(Keyspace(job).workers))
    finally:
        client.close()


def _idle_workers(redis_url: str, job: str) -> int:
    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.zcard(Keyspace(job).idle))
    finally:
        client.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[ServerThread, RequestLog]]:
    root = generate_site(tmp_path / "site", n_pages=20)
    log = RequestLog()
    with ServerThread(make_static_app(root, log=log)) as server:
        yield server, log


@pytest.fixture
def second_job(redis_url: str) -> Iterator[str]:
    name = f"test-{time.monotonic_ns() % 10**12:x}-b"
    yield name
    for key in _keys(redis_url, name):
        redis.Redis.from_url(redis_url).unlink(key)


def test_jobs_lists_each_job_with_its_counts(
    redis_url: str, job: str, second_job: str, tmp_path: Path
) -> None:
    for name, urls in ((job, ["a", "b", "c"]), (second_job, ["x"])):
        run_crawlq(
            "seed", *(f"http://127.0.0.1:9/{u}" for u in urls), "--frontier", redis_url,
            "--job", name, "--store", str(tmp_path / f"{name}.db"),
        )  # fmt: skip
    listed = json.loads(run_crawlq("jobs", "--frontier", redis_url, "--json").stdout)
    mine = {j["name"]: j for j in listed if j["name"] in (job, second_job)}
    assert mine[job]["queued"] == 3 and mine[second_job]["queued"] == 1
    assert mine[job]["engine"] == "native" and mine[job]["paused"] is False
    assert mine[job]["done"] == mine[job]["dead"] == 0 and mine[job]["finished"] is False
    assert mine[job]["created_at"] is not None and abs(mine[job]["created_at"] - time.time()) < 3600
    table = run_crawlq("jobs", "--frontier", redis_url).stdout
    assert job in table and second_job in table


def test_delete_removes_every_key_and_is_refused_while_a_worker_is_live(
    redis_url: str, job: str, tmp_path: Path, site: tuple[ServerThread, RequestLog]
) -> None:
    server, _log = site
    store = tmp_path / "store.db"
    run_crawlq(
        "seed", server.base_url + "/index.html", "--frontier", redis_url, "--job", job,
        "--store", str(store), "--delay", "0",
    )  # fmt: skip
    worker = worker_proc(redis_url, job, store=store)  # stays up after the crawl is done
    try:
        _wait_for(lambda: _live_workers(redis_url, job) == 1, "the worker's heartbeat")
        refused = run_crawlq("job", "delete", job, "--frontier", redis_url, check=False)
        assert refused.returncode == 1
        assert "live worker" in refused.stderr and "--force" in refused.stderr
        assert _keys(redis_url, job)  # nothing deleted
    finally:
        worker.terminate()
        worker.wait(60)
    # Its heartbeat stays until it is stale; --force is what an operator does now.
    done = run_crawlq("job", "delete", job, "--frontier", redis_url, "--force")
    assert "deleted" in done.stdout
    assert _keys(redis_url, job) == []  # SCAN finds no key of the job
    gone = run_crawlq("job", "delete", job, "--frontier", redis_url, check=False)
    assert gone.returncode == 1 and "no job" in gone.stderr


def test_pause_stops_requests_cluster_wide_and_resume_finishes_the_crawl(
    redis_url: str, job: str, tmp_path: Path, site: tuple[ServerThread, RequestLog]
) -> None:
    server, log = site
    store = tmp_path / "store.db"
    run_crawlq(
        "seed", server.base_url + "/index.html", "--frontier", redis_url, "--job", job,
        "--store", str(store), "--delay", "0",
    )  # fmt: skip
    run_crawlq("job", "pause", job, "--frontier", redis_url)  # before any worker started
    info = json.loads(run_crawlq("jobs", "--frontier", redis_url, "--json").stdout)
    assert next(j for j in info if j["name"] == job)["paused"] is True
    workers = [worker_proc(redis_url, job, "--exit-when-done", store=store) for _ in range(2)]
    try:
        # Both workers are up and waiting for work the frontier will not lease.
        _wait_for(lambda: _idle_workers(redis_url, job) == 2, "two idle workers")
        time.sleep(2)  # a broken pause would fetch within this; a working one never does
        assert log.requests() == []
        assert [w.poll() for w in workers] == [None, None]  # paused, not stopped
        run_crawlq("job", "resume", job, "--frontier", redis_url)
        for w in workers:
            assert w.wait(120) == 0
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait(30)
    urls = stored_urls(store)
    assert len(urls) == 20 and set(urls.values()) == {1}
    pages = [r for r in log.requests() if r.path != "/robots.txt"]
    assert len(pages) == len({r.path for r in pages}) == 20


def test_expire_gives_a_finished_job_a_ttl_and_refuses_one_with_work(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    run_crawlq(
        "seed", "http://127.0.0.1:9/a", "--frontier", redis_url, "--job", job,
        "--store", str(tmp_path / "s.db"),
    )  # fmt: skip
    refused = run_crawlq("job", "expire", job, "--ttl", "60", "--frontier", redis_url, check=False)
    assert refused.returncode == 1 and "not finished" in refused.stderr
    run_crawlq("job", "expire", job, "--ttl", "600", "--frontier", redis_url, "--force")
    client = redis.Redis.from_url(redis_url)
    try:
        ttls = [client.ttl(key) for key in _keys(redis_url, job)]
    finally:
        client.close()
    assert ttls and all(0 < t <= 600 for t in ttls)


@pytest.mark.parametrize(
    "args",
    [
        ["jobs", "--frontier", "sqlite:///x.db"],
        ["job", "pause", "bad name", "--frontier", "redis://127.0.0.1:6379/9"],
        ["job", "expire", "j", "--ttl", "0", "--frontier", "redis://127.0.0.1:6379/9"],
    ],
)
def test_bad_input_is_one_usage_error(args: list[str], tmp_path: Path) -> None:
    proc = run_crawlq(*args, check=False, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "x.db").exists()


def _seed_stdin(text: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``crawlq seed - ARGS`` with ``text`` on its stdin."""
    return subprocess.run(
        [sys.executable, "-m", "crawlq", "seed", "-", *args],
        input=text, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_seeding_nothing_with_no_domains_is_refused_and_creates_no_job(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    """User trial: it printed "queued 0 new of 0" and left a job no worker could run."""
    store = tmp_path / "s.db"
    shared = ["--frontier", redis_url, "--job", job, "--store", str(store)]
    for proc, given in [
        (run_crawlq("seed", *shared, check=False), "no URLs given"),
        (_seed_stdin("", *shared), "stdin held no URLs"),
        (_seed_stdin("\n  \n", *shared), "stdin held no URLs"),  # blank lines are no URLs
    ]:
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert "Traceback" not in proc.stderr
        assert f"{given}: nothing to seed and no domains to scope job {job!r}" in proc.stderr
        assert "--allow-domain" in proc.stderr and "no job was created" in proc.stderr
    assert _keys(redis_url, job) == [] and not store.exists()
    # with a scope, no URLs create the job for an inbox's producers
    created = run_crawlq("seed", *shared, "--allow-domain", "example.com")
    assert created.stdout.startswith(f"queued 0 new of 0 in job {job}")
    # and once it exists, an empty batch is no error: the job's scope is set
    for proc in (_seed_stdin("", *shared), run_crawlq("seed", *shared, check=False)):
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"queued 0 new of 0 in job {job}")


def test_a_spider_with_allowed_domains_scopes_a_job_seeded_with_nothing(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    spider = tmp_path / "scoped.py"
    spider.write_text(
        "from crawlq.spider import Spider\n\n\n"
        "class Scoped(Spider):\n    allowed_domains = ['example.com']\n\n\n"
        "class Unscoped(Spider):\n    pass\n"
    )
    shared = ["--frontier", redis_url, "--job", job, "--store", str(tmp_path / "s.db")]
    refused = run_crawlq("seed", *shared, "--spider", f"{spider}:Unscoped", check=False)
    assert refused.returncode == 2, refused.stderr
    assert f"spider {spider}:Unscoped has no start requests: nothing to seed" in refused.stderr
    assert _keys(redis_url, job) == []
    created = run_crawlq("seed", *shared, "--spider", f"{spider}:Scoped")
    assert created.stdout.startswith(f"queued 0 new of 0 in job {job}")


def test_a_celery_job_is_paused_at_its_politeness_slot(redis_url: str, job: str) -> None:
    """acquire.lua grants nothing while paused (a unit check of the script on real Redis)."""
    import asyncio

    from crawlq.celery.runtime.state import CeleryState
    from crawlq.frontier.redis.jobs import PAUSE_POLL_MS, JobAdmin
    from crawlq.rules.politeness import HostPolicy

    async def go() -> None:
        state = await CeleryState.open(redis_url, job)
        admin = JobAdmin.open(redis_url)
        try:
            policy = HostPolicy(0.0, 4)
            await admin.pause(job)
            paused = await state.acquire("h", 1, policy, hold_s=10)
            assert paused.tokens == () and paused.wait_s == PAUSE_POLL_MS / 1000
            await admin.resume(job)
            granted = await state.acquire("h", 1, policy, hold_s=10)
            assert len(granted.tokens) == 1
        finally:
            await admin.close()
            await state.close()

    asyncio.run(go())
