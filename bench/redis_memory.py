"""Benchmark: Redis memory per queued URL of a job (issue 26), nothing fetched.

Starts a private ``redis-server`` on a spare loopback port (own temp dir, no persistence),
seeds ``--urls`` requests spread evenly over ``--hosts`` hosts into one job through
`crawlq.frontier.redis.RedisFrontier.push` (the path workers' discovered links take), and
reports:

* ``used_memory`` after minus before, per queued URL (what a job's queue costs the server);
* per key family, ``MEMORY USAGE key SAMPLES 0`` (every element counted) of the job's keys,
  per queued URL: the request records (``reqs``), the queue scores (``scores``, where the
  layout has them), the per-host queues (``q:{host}``, with their encoding) and the seen set;
* the seeding rate (URLs/s through ``push``, one process).

    python bench/redis_memory.py [--urls 100000] [--hosts 100] [--shape link|seed]
        [--redis-config zset-max-listpack-entries=1024 ...] [--repeat 1]

``--shape link`` (default) seeds what a crawl discovers: ``https://www.siteNNN.example/…`` URLs
of depth 1 with a ``referrer`` (the host's front page); ``seed`` plain URLs as ``crawlq seed``
queues them. ``--redis-config`` passes settings to the server (``CONFIG SET`` before seeding),
to see what the per-host queues cost in another encoding. The server is stopped by its PID.
Run by hand; never part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
from _harness import free_port, git_state, wait_for_port

from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.request import CrawlRequest

JOB = "mem"


class PrivateRedis:
    """``redis-server`` on a spare loopback port in its own temp dir; stopped by its PID."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="crawlq-mem-"))
        cmd = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
            str(self.dir), "--save", "", "--appendonly", "no",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.port)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def requests(n: int, hosts: int, shape: str) -> list[CrawlRequest]:
    """``n`` requests, round-robin over ``hosts`` hosts (request ``i`` on host ``i % hosts``)."""
    out = []
    for i in range(n):
        site = f"https://www.site{i % hosts:04d}.example"
        url = f"{site}/docs/section-{i // hosts % 100:02d}/page-{i // hosts:07d}.html"
        if shape == "link":
            out.append(CrawlRequest(url, depth=1, referrer=site + "/"))
        else:
            out.append(CrawlRequest(url))
    return out


def family(key: bytes, keys: Keyspace) -> str:
    """The key family of one of the job's keys, as the report groups them."""
    name = key.decode()
    if name.startswith(keys.prefix + "q:"):
        return "queues"
    short = name.removeprefix(keys.prefix)
    return short if short in {"reqs", "scores", "seen"} else "other"


def measure(server: PrivateRedis, n: int, hosts: int, shape: str) -> dict[str, Any]:
    """Seed one job and return the memory figures (the job is deleted after)."""
    sync = redis.Redis.from_url(server.url)
    sync.flushall()
    before = int(sync.info("memory")["used_memory"])
    batch = requests(n, hosts, shape)

    async def seed(batch: list[CrawlRequest]) -> float:
        frontier = await RedisFrontier.open(server.url, JOB, create=True)
        try:
            start = time.perf_counter()
            for at in range(0, n, 10_000):
                await frontier.push(batch[at : at + 10_000])
            return time.perf_counter() - start
        finally:
            await frontier.close()

    elapsed = asyncio.run(seed(batch))
    del batch
    after = int(sync.info("memory")["used_memory"])
    keys = Keyspace(JOB)
    families: dict[str, int] = {}
    encodings: dict[str, set[str]] = {}
    names = list(sync.scan_iter(match=keys.pattern(), count=1000))
    pipe = sync.pipeline(transaction=False)
    for name in names:
        pipe.memory_usage(name, samples=0)
        pipe.object("encoding", name)
    replies = pipe.execute()
    for i, name in enumerate(names):
        fam = family(name, keys)
        families[fam] = families.get(fam, 0) + int(replies[2 * i] or 0)
        encodings.setdefault(fam, set()).add(replies[2 * i + 1].decode())
    queued = int(sync.hget(keys.stats, "queued") or 0)
    sync.flushall()
    sync.close()
    return {
        "queued": queued,
        "delta": after - before,
        "families": families,
        "encodings": encodings,
        "rate": n / elapsed,
    }


def report(args: argparse.Namespace, runs: Sequence[dict[str, Any]]) -> None:
    n = runs[0]["queued"]
    print(f"\n{n:,} queued URLs over {args.hosts:,} hosts ({n // args.hosts:,} per host),"
          f" shape {args.shape}, redis config {args.redis_config or 'default'}")  # fmt: skip
    print(
        "| run | used_memory delta B/URL | reqs | scores | queues | seen | other | URLs/s seeded |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(runs, 1):
        f = r["families"]
        cells = [f"{f.get(k, 0) / n:.1f}" for k in ("reqs", "scores", "queues", "seen", "other")]
        print(f"| {i} | {r['delta'] / n:.1f} | " + " | ".join(cells) + f" | {r['rate']:,.0f} |")
    enc = runs[0]["encodings"]
    print("encodings: " + ", ".join(f"{k} {'/'.join(sorted(v))}" for k, v in sorted(enc.items())))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--shape", choices=("link", "seed"), default="link")
    parser.add_argument("--redis-config", nargs="*", default=[], metavar="NAME=VALUE")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    server = PrivateRedis()
    try:
        sync = redis.Redis.from_url(server.url)
        version = sync.info("server")["redis_version"]
        for setting in args.redis_config:
            name, _, value = setting.partition("=")
            sync.config_set(name, value)
        sync.close()
        print(f"crawlq {git_state()}, Redis {version}, Python {sys.version.split()[0]}")
        runs = [measure(server, args.urls, args.hosts, args.shape) for _ in range(args.repeat)]
    finally:
        server.stop()
    report(args, runs)


if __name__ == "__main__":
    main()
