"""Backpressure: a bounded frontier (``--max-queued``) against a fast producer (Redis).

A producer (``crawlq seed -``) pushes 100,000 URLs into a job capped at 10,000 queued. With
``block`` it waits while one slow consumer drains the job, and the queue never holds more
than the cap; with ``drop-lowest`` it never waits, and every drop is a dead letter with its
reason. Redis running out of memory is covered in ``test_redis_failures.py``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
import redis

from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.rules.politeness import HostPolicy
from tests.conftest import run_crawlq

pytestmark = pytest.mark.e2e

TOTAL = 100_000
CAP = 10_000


def _seed(
    redis_url: str, job: str, store: Path, lines: list[str], *extra: str
) -> subprocess.Popen[str]:
    """``crawlq seed -`` reading ``lines`` from a file as its stdin (the producer)."""
    feed = store.with_suffix(".in")
    feed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "crawlq", "seed", "-", "--frontier", redis_url, "--job", job]
    cmd += ["--store", str(store), "--max-queued", str(CAP), "--delay", "0", *extra]
    with feed.open("rb") as stdin:
        return subprocess.Popen(
            cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )


def test_block_makes_the_producer_wait_and_loses_nothing(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    urls = [f"http://127.0.0.1:9/p/{n}" for n in range(TOTAL)]
    producer = _seed(redis_url, job, tmp_path / "s.db", urls)
    client = redis.Redis.from_url(redis_url)
    k = Keyspace(job)
    most_queued = most_reqs = 0
    leased: set[str] = set()

    async def consume() -> None:
        nonlocal most_queued, most_reqs
        while not client.hexists(k.job_info, "id"):  # the producer creates the job
            assert producer.poll() is None, producer.communicate()
            await asyncio.sleep(0.05)
        frontier = await RedisFrontier.open(redis_url, job, default_policy=HostPolicy(0.0, 10_000))
        try:
            while producer.poll() is None or len(leased) < TOTAL:
                most_queued = max(most_queued, int(client.hget(k.stats, "queued") or 0))
                most_reqs = max(most_reqs, int(client.hlen(k.reqs)))
                got = await frontier.lease(250, "slow-consumer", 60.0, wait_s=0.2)
                leased.update(lease.request.url for lease in got)
                await frontier.ack(got)
                await asyncio.sleep(0.05)  # a slow worker: the producer is much faster
                if producer.poll() not in (None, 0):
                    break
        finally:
            await frontier.close()

    asyncio.run(asyncio.wait_for(consume(), 600))
    out, err = producer.communicate(timeout=120)
    assert producer.returncode == 0, err
    assert f"queued {TOTAL} new of {TOTAL}" in out
    assert "frontier full" in err and "waiting" in err  # it waited, and said so
    assert most_queued <= CAP and most_reqs <= CAP  # the queue never outgrew the bound
    assert leased == set(urls)  # every URL leased once; nothing lost
    stats = client.hgetall(k.stats)
    assert int(stats[b"seen"]) == int(stats[b"done"]) == TOTAL
    assert int(stats.get(b"dead", 0)) == 0
    client.close()


def test_drop_lowest_keeps_the_highest_priorities_and_records_every_drop(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    lines = [
        json.dumps({"url": f"http://127.0.0.1:9/p/{n}", "priority": n % 10}) for n in range(TOTAL)
    ]
    producer = _seed(redis_url, job, tmp_path / "s.db", lines, "--when-full", "drop-lowest")
    _, err = producer.communicate(timeout=300)
    assert producer.returncode == 0, err
    client = redis.Redis.from_url(redis_url)
    k = Keyspace(job)
    stats = client.hgetall(k.stats)
    assert int(stats[b"queued"]) == CAP
    assert int(stats[b"dead"]) == int(stats[b"dropped"]) == TOTAL - CAP
    assert int(stats[b"seen"]) == TOTAL  # queued + dead: nothing lost
    dead = cast("dict[bytes, bytes]", client.hgetall(k.dead))
    assert len(dead) == TOTAL - CAP
    assert all(value.startswith(b"frontier_full\n") for value in dead.values())
    queued = [json.loads(v.split(b"\n", 1)[1]) for v in cast("list[bytes]", client.hvals(k.reqs))]
    assert len(queued) == CAP
    assert {r.get("priority") for r in queued} == {9}  # exactly the 10,000 of priority 9
    client.close()


# -- `crawlq dead replay` into a bounded job: the same bound as seeding -----------------------


def _replay(redis_url: str, job: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "crawlq", "dead", "replay", "--frontier", redis_url]
    cmd += ["--job", job, "--json", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_dead_letter_replay_waits_for_room_under_block(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    store = tmp_path / "s.db"
    seed = ["seed", "--frontier", redis_url, "--job", job, "--store", str(store)]
    seed += ["--max-queued", "3", "--delay", "0"]
    run_crawlq(*seed, *(f"http://127.0.0.1:9/d/{n}" for n in range(3)))
    client = redis.Redis.from_url(redis_url)
    k = Keyspace(job)

    async def kill_three() -> None:  # three dead letters (as a worker that failed them)
        frontier = await RedisFrontier.open(redis_url, job, default_policy=HostPolicy(0.0, 100))
        try:
            for lease in await frontier.lease(3, "w", 60.0):
                await frontier.dead(lease, "connect_error")
        finally:
            await frontier.close()

    asyncio.run(kill_three())
    run_crawlq(*seed, "http://127.0.0.1:9/q/1", "http://127.0.0.1:9/q/2")
    assert int(client.hget(k.stats, "queued") or 0) == 2

    # nothing makes room: one goes back, two stay dead when the wait runs out (exit 1)
    out, err = _replay(redis_url, job, "--max-push-wait", "0.3").communicate(timeout=60)
    report = json.loads(out)
    assert (report["replayed"], report["left_full"], report["waited_for_room"]) == (1, 2, True)
    assert "frontier full" in err
    assert int(client.hget(k.stats, "queued") or 0) == 3
    assert client.hlen(k.dead) == 2

    # a consumer makes room: the replay waits, then requeues the rest, never past the bound
    replay = _replay(redis_url, job)
    most_queued, leased = 0, 0

    async def consume() -> None:
        nonlocal most_queued, leased
        frontier = await RedisFrontier.open(redis_url, job, default_policy=HostPolicy(0.0, 100))
        try:
            while replay.poll() is None:
                most_queued = max(most_queued, int(client.hget(k.stats, "queued") or 0))
                got = await frontier.lease(1, "slow-consumer", 60.0, wait_s=0.1)
                leased += len(got)
                await frontier.ack(got)
                await asyncio.sleep(0.2)
        finally:
            await frontier.close()

    asyncio.run(asyncio.wait_for(consume(), 120))
    out, err = replay.communicate(timeout=60)
    assert replay.returncode == 0, err
    report = json.loads(out)
    assert (report["replayed"], report["left_full"]) == (2, 0)
    assert most_queued <= 3 and int(client.hget(k.stats, "queued") or 0) <= 3
    assert client.hlen(k.dead) == 0
    client.close()


def test_a_dead_letter_replay_under_drop_lowest_drops_and_says_so(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    urls = [f"http://127.0.0.1:9/p/{n}" for n in range(5)]
    run_crawlq(
        "seed", "--frontier", redis_url, "--job", job, "--store", str(tmp_path / "s.db"),
        "--max-queued", "3", "--when-full", "drop-lowest", "--delay", "0", *urls,
    )  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    k = Keyspace(job)
    assert (int(client.hget(k.stats, "queued") or 0), client.hlen(k.dead)) == (3, 2)
    proc = run_crawlq("dead", "replay", "--frontier", redis_url, "--job", job)
    assert "replayed 0 dead letters" in proc.stdout
    assert "2 dead-lettered as frontier_full" in proc.stdout, proc.stdout
    assert int(client.hget(k.stats, "queued") or 0) == 3  # the bound held
    dead = cast("dict[bytes, bytes]", client.hgetall(k.dead))
    assert len(dead) == 2 and all(v.startswith(b"frontier_full\n") for v in dead.values())
    client.close()
