"""The Celery engine's state on a Redis at its ``maxmemory`` (``noeviction``): it drains.

A private ``redis-server`` (stopped by PID) gets ``maxmemory 1`` once the job's URLs are
admitted, so every command that may grow memory is refused (``OOM``). A task still takes its
pending URLs, records its runner, takes host slots, reschedules, settles and beats; orphans
are taken back; only `CeleryState.admit` (new URLs) raises `FrontierFull`, writing nothing.

End to end, ``crawl --engine celery`` seeds a loopback site into a private 20 MB
``noeviction`` Redis (padded near full, with `tests.e2e.test_redis_failures`' helpers; the
broker is the test Redis's own DB), Redis is then made full, and one ``celery worker`` drains
the job: every page stored once, its links counted ``frontier_full``, the crawl ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from crawlq.celery.runtime.state import SCRIPTS, TAKE_DUPLICATE, TAKE_RUN, TAKE_UNSEEN, CeleryState
from crawlq.clock import ManualClock
from crawlq.errors import FrontierFull
from crawlq.frontier.redis import Keyspace
from crawlq.frontier.redis.scripts import Script
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import HostPolicy
from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryWorker, job_counts, stored_urls, wait_for
from tests.e2e.test_redis_failures import full_redis, pad
from tests.services import RedisServer

__all__ = ["full_redis"]  # a fixture of the native engine's test of a full Redis


def reqs(*paths: str) -> list[CrawlRequest]:
    return [CrawlRequest(f"http://a.test/{p}") for p in paths]


@pytest.fixture
async def full() -> AsyncIterator[tuple[CeleryState, aioredis.Redis]]:
    """A Celery job with three pending URLs on a private Redis that then refuses growing writes."""
    server = RedisServer(appendonly=False, args=("--maxmemory-policy", "noeviction"))
    server.start()
    client = aioredis.Redis.from_url(server.url)
    state = await CeleryState.open(server.url, "full")
    try:
        assert (
            await state.admit([(r, "seed") for r in reqs("a", "b", "c")], run=False) == [True] * 3
        )
        await client.config_set("maxmemory", "1")  # every write that may grow memory: OOM
        yield state, client
    finally:
        await state.close()
        await client.aclose()
        server.cleanup()


def test_the_draining_scripts_run_at_maxmemory_and_admit_does_not() -> None:
    allowed = {name for name, script in SCRIPTS.items() if script.allows_oom}
    draining = {"take", "settle", "acquire", "orphans", "start_task", "reschedule"}
    assert allowed == draining
    for name in allowed:  # Redis reads script flags from the first line only
        assert SCRIPTS[name].source.startswith("#!lua flags=allow-oom\n"), name
    assert Script("heartbeat", "crawlq.celery.runtime").allows_oom


async def test_a_full_redis_runs_the_tasks_already_sent_and_refuses_new_urls(
    full: tuple[CeleryState, aioredis.Redis],
) -> None:
    state, client = full
    k = Keyspace("full")
    a, b, c = reqs("a", "b", "c")
    with pytest.raises(FrontierFull, match="maxmemory"):
        await state.admit([(r, "page") for r in reqs("new")], run=False)
    assert (await state.counts()).seen == 3  # the refused admit wrote nothing
    unseen = reqs("unseen")[0]
    flags = await state.take([a.fingerprint, b.fingerprint, c.fingerprint, unseen.fingerprint])
    assert flags == [TAKE_RUN, TAKE_RUN, TAKE_RUN, TAKE_UNSEEN]
    with pytest.raises(FrontierFull):  # a scrape.delay URL never admitted: refused
        await state.admit([(unseen, "task")], run=True)

    await state.start_task("host-1:42:7", [a.fingerprint, b.fingerprint])
    assert await client.hget(k.running, "host-1:42:7") == a.fingerprint + b.fingerprint
    grant = await state.acquire("a.test", 2, HostPolicy(0.0, 4), 60.0, "host-1:42:7")
    assert len(grant.tokens) == 2
    await state.release("a.test", grant.tokens)
    await state.reschedule([c.fingerprint], 30.0)
    await state.add_delayed(1)
    assert (await state.counts()).delayed == 1
    beat = Script("heartbeat", "crawlq.celery.runtime")
    assert await beat.run(client, [k.job_info, k.workers], ["host-2:9", 1]) == 1

    assert await state.settle([a.fingerprint], [b.fingerprint], ["a.test"], frontier_full=4) == 2
    assert await state.settle([a.fingerprint], [], frontier_full=4) == 0  # counted once
    counts = await state.counts()
    assert (counts.done, counts.dead, counts.pending, counts.frontier_full) == (1, 1, 1, 4)
    assert await state.take([a.fingerprint], retries_started=1) == [TAKE_DUPLICATE]
    assert (await state.counts()).delayed == 0

    # the runner of c dies: its URL is taken back at maxmemory too
    await state.start_task("host-3:1:1", [c.fingerprint])
    state.clock = ManualClock(state.clock.wall_ms() + 3_600_000)
    (orphan,) = await state.orphans(60.0)
    assert orphan.url == c.url
    await state.end_task("host-1:42:7")
    assert await state.settle([c.fingerprint], []) == 1
    assert (await state.counts()).pending == 0


N_PAGES = 40


def write_site(root: Path) -> list[str]:
    """Pages ``p<i>.html``, each linking to one page never seeded, ``n<i>.html``."""
    root.mkdir()
    for i in range(N_PAGES):
        (root / f"p{i}.html").write_text(
            f'<html><head><title>p{i}</title></head><body><a href="n{i}.html">next</a></body>'
            "</html>\n"
        )
    return [f"/p{i}.html" for i in range(N_PAGES)]


@pytest.mark.e2e
@pytest.mark.timeout(400)
def test_a_celery_crawl_drains_a_full_redis_and_ends_counting_the_refused_links(
    full_redis: RedisServer,
    celery_redis_url: str,
    queue: str,
    broker_cleanup: Callable[[str, str], None],
    workers: Callable[..., CeleryWorker],
    tmp_path: Path,
) -> None:
    broker_cleanup(celery_redis_url, queue)
    paths = write_site(tmp_path / "site")
    client = redis.Redis.from_url(full_redis.url)
    pad(client)  # near its 20 MB maxmemory (the job's state is on this Redis, the broker not)
    store = tmp_path / "store.db"  # the workers' store too (`workers`)
    with ServerThread(make_static_app(tmp_path / "site")) as http:
        urls = [http.base_url + path for path in paths]
        cmd = [
            sys.executable, "-m", "crawlq", "crawl", *urls, "--engine", "celery",
            "--broker", celery_redis_url, "--frontier", full_redis.url, "--job", "full",
            "--store", str(store), "--delay", "0", "-q",
        ]  # fmt: skip
        env = {**os.environ, "CRAWLQ_CELERY_QUEUE": queue}
        crawl = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_for(
                lambda: job_counts(full_redis.url, "full").get("pending") == N_PAGES,
                120,
                "the seeds to be admitted",
            )
            # Redis is full now, and stays full while the worker drains (as if other jobs
            # held the memory freed): no link can be admitted, so the counts below are exact
            used = int(client.info("memory")["used_memory"])
            client.config_set("maxmemory", str(used - 1_000_000))
            worker = workers(celery_redis_url, full_redis.url, queue, "--concurrency", "1")
            out, err = crawl.communicate(timeout=300)
        finally:
            if crawl.poll() is None:
                crawl.kill()
                crawl.communicate()
    assert crawl.returncode == 0, err
    assert "crawl finished" in out, out
    assert stored_urls(store) == Counter(urls)  # each page once, and none of its links
    counts = job_counts(full_redis.url, "full")
    assert (counts["pending"], counts["seen"], counts["done"], counts.get("dead", 0)) == (
        0,
        N_PAGES,
        N_PAGES,
        0,
    )  # nothing lost: admitted = stored + dead
    assert counts["frontier_full"] == N_PAGES  # each page's one link, counted once
    assert (
        f"links not followed: {N_PAGES} by this job (frontier_full {N_PAGES}): Redis was full"
        in out
    ), out
    worker.stop()
    warnings = [line for line in worker.log_tail(10_000).splitlines() if "Redis is full" in line]
    assert 1 <= len(warnings) <= 3, worker.log_tail()  # a state line, not one per page
    client.close()
