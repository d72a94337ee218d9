"""``crawlq seed -`` keeps its memory flat however many lines stdin holds (issue 23, item 6).

A generator child writes 1,000,000 URLs on SQLite, 200,000 on Redis (and some duplicates and
blank lines) into the seed's stdin; the seed runs under a small launcher that reports its peak
RSS (``wait4``), as ``tests/engine/test_hostile_pages.py`` measures a crawl. On both frontier
backends the peak stays under 100 MB (main before the spool: 720 MB at 1,000,000, 118 MB at
100,000) and the job holds exactly the distinct URLs afterwards. Redis's count is the smaller
so the two tests stay within a few minutes on a slow machine; the spool is the same code.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from crawlq.frontier.redis import Keyspace
from crawlq.frontier.sqlite import SqliteFrontier
from crawlq.rules.politeness import HostPolicy

pytestmark = pytest.mark.e2e

DISTINCT = 1_000_000
DISTINCT_REDIS = 200_000
DUPLICATE_EVERY = 1000
"""Every this many URLs, the last one is written again (1,000 duplicates in all)."""
PEAK_MB = 100

_GENERATOR = f"""
import sys
out = sys.stdout
for n in range(int(sys.argv[1])):
    url = f"http://127.0.0.{{n % 20 + 1}}:9/section/{{n // 1000}}/page/{{n}}.html"
    out.write(url + "\\n")
    if n % {DUPLICATE_EVERY} == {DUPLICATE_EVERY} - 1:
        out.write(url + "\\n\\n")  # written twice, and a blank line after
"""
"""Writes the seed lines to stdout: argv[1] URLs on 20 hosts, each DUPLICATE_EVERY-th twice."""

_PEAK_RSS_LAUNCHER = """
import os, subprocess, sys
env = {k: v for k, v in os.environ.items() if not k.startswith('COVERAGE_')}  # untraced
proc = subprocess.Popen(sys.argv[1:], env=env)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""
"""Runs a command (stdin, stdout and stderr its own) and then prints its exit code and its
peak RSS in kB (``wait4``): a child forked from the large pytest process would count the
parent's pages until its exec. The command runs without coverage's tracer (``pytest --cov``
measures subprocesses): the peak is crawlq's own, and a traced seed takes minutes."""


def _seed_from_a_generator(distinct: int, *args: str) -> tuple[int, float, str, str]:
    """``crawlq seed - ARGS`` fed by the generator (``distinct`` URLs); its exit code, peak
    MB, stdout, stderr."""
    generator = subprocess.Popen(
        [sys.executable, "-c", _GENERATOR, str(distinct)],
        stdout=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")},  # untraced
    )
    assert generator.stdout is not None
    try:
        ran = subprocess.run(
            [sys.executable, "-c", _PEAK_RSS_LAUNCHER, sys.executable, "-m", "crawlq",
             "seed", "-", *args],
            stdin=generator.stdout, capture_output=True, text=True, timeout=1500, check=False,
        )  # fmt: skip
    finally:
        generator.stdout.close()
        generator.wait(timeout=60)
    assert generator.returncode == 0
    *printed, last = ran.stdout.strip().splitlines()
    returncode, peak_kb = (int(field) for field in last.split())
    return returncode, peak_kb / 1024, "\n".join(printed), ran.stderr  # kB on Linux


def _given(distinct: int) -> int:
    return distinct + distinct // DUPLICATE_EVERY


@pytest.mark.timeout(1800)
def test_a_million_urls_on_stdin_stay_under_100_mb_sqlite(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    returncode, peak_mb, out, err = _seed_from_a_generator(DISTINCT, "--store", str(store))
    assert returncode == 0, err
    assert f"queued {DISTINCT} new of {_given(DISTINCT)}" in out, out + err
    assert peak_mb < PEAK_MB, f"seed of {_given(DISTINCT)} lines peaked at {peak_mb:.0f} MB"

    async def queued() -> int:
        frontier = await SqliteFrontier.open(store, default_policy=HostPolicy(0.0, 1))
        try:
            return (await frontier.stats()).queued
        finally:
            await frontier.close()

    assert asyncio.run(queued()) == DISTINCT


@pytest.mark.timeout(1800)
def test_many_urls_on_stdin_stay_under_100_mb_redis(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    args = ["--frontier", redis_url, "--job", job, "--store", str(tmp_path / "s.db")]
    n = DISTINCT_REDIS
    returncode, peak_mb, out, err = _seed_from_a_generator(n, *args)
    assert returncode == 0, err
    assert f"queued {n} new of {_given(n)} in job {job}" in out, out + err
    assert peak_mb < PEAK_MB, f"seed of {_given(n)} lines peaked at {peak_mb:.0f} MB"
    client = redis.Redis.from_url(redis_url)
    try:
        keys = Keyspace(job)
        stats = client.hgetall(keys.stats)
        assert int(stats[b"queued"]) == int(stats[b"seen"]) == n
        assert client.scard(keys.seen) == n
    finally:
        client.close()
