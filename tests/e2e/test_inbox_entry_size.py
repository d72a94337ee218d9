"""An inbox entry over the size limit is refused inside Redis: a worker never reads it whole."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from crawlq.frontier.redis import Keyspace
from crawlq.testing.static import generate_site, make_static_app
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.e2e.test_distributed import stored_count, stored_urls

pytestmark = pytest.mark.e2e

BIG_BYTES = 50 * 1024 * 1024

_PEAK_RSS_LAUNCHER = """
import os, signal, subprocess, sys
env = {k: v for k, v in os.environ.items() if not k.startswith('COVERAGE_')}  # untraced
proc = subprocess.Popen(sys.argv[1:], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
print(proc.pid, flush=True)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, flush=True)
"""
"""Runs a command, prints its pid, then its exit code and its own peak RSS in kB (``wait4``);
a SIGTERM to the launcher goes to the command. A launcher, because a child forked straight
from this (large) pytest process would count the parent's pages until its exec. The command
runs without coverage's tracer (``pytest --cov`` measures subprocesses)."""


def big_entry(tag: str) -> bytes:
    """A JSON request of `BIG_BYTES` bytes whose first bytes say which one it is."""
    head = json.dumps({"url": f"http://127.0.0.1:9/{tag}", "meta": {"pad": ""}})[:-3].encode()
    return head + b"x" * (BIG_BYTES - len(head) - 3) + b'"}}'


def wait_for(
    condition: Callable[[], object], what: str, proc: subprocess.Popen[str], timeout_s: float = 120
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert proc.poll() is None, f"the worker exited while waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(0.1)


def test_a_50_mb_inbox_entry_is_rejected_with_its_size_and_the_worker_stays_small(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    """Two entries of 50 MB: one waiting in the inbox when the worker starts (its drain),
    one pushed alone while the worker is idle, blocked on the inbox. Each is rejected with
    its size and its first bytes, the entries around them are crawled, and the worker's peak
    RSS stays under 100 MB (it reached 194 MB reading such an entry whole)."""
    root = generate_site(tmp_path / "site", n_pages=5)
    keys = Keyspace(job)
    client = redis.Redis.from_url(redis_url)
    with ServerThread(make_static_app(root)) as server:
        store = tmp_path / "store.db"
        run_crawlq(
            "seed", "--frontier", redis_url, "--job", job, "--store", str(store),
            "--allow-domain", "127.0.0.1", "--delay", "0", "--max-depth", "0",
            "--allow-private", "--ignore-robots",
        )  # fmt: skip
        urls = [f"{server.base_url}/page-{i}.html" for i in (1, 2, 3)]
        first, second = big_entry("first"), big_entry("second")
        client.lpush(keys.inbox, urls[0], first, urls[1])  # drained: urls[0] is taken first
        launcher = subprocess.Popen(
            [sys.executable, "-c", _PEAK_RSS_LAUNCHER, sys.executable, "-m", "crawlq",
             "worker", "--frontier", redis_url, "--job", job, "--store", str(store), "-q"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert launcher.stdout is not None
            launcher.stdout.readline()  # the worker's pid: it runs
            wait_for(lambda: stored_count(store) == 2, "two pages stored", launcher)
            wait_for(lambda: client.zcard(keys.idle) > 0, "an idle worker", launcher)
            client.lpush(keys.inbox, second)  # the blocked worker is woken by this one
            client.lpush(keys.inbox, urls[2])
            wait_for(lambda: stored_count(store) == 3, "the third page stored", launcher)
            wait_for(lambda: client.llen(keys.rejected) == 2, "two rejections", launcher)
            launcher.send_signal(signal.SIGTERM)
            out, _ = launcher.communicate(timeout=60)
        finally:
            if launcher.poll() is None:
                launcher.kill()
                launcher.wait()
        rejected = [json.loads(r) for r in client.lrange(keys.rejected, 0, -1)]
        claims = [client.llen(k) for k in client.scan_iter(match=keys.claims_pattern())]
        client.close()
    returncode, peak_kb = map(int, out.split())
    assert returncode == 0
    assert set(stored_urls(store)) == set(urls)
    assert sum(claims) == 0  # nothing left claimed: both big entries are gone from Redis
    for record, entry in zip(reversed(rejected), (first, second), strict=True):
        assert record["size"] == BIG_BYTES
        assert record["reason"] == f"entry_too_large: {BIG_BYTES} bytes (the limit is 65536)"
        assert record["truncated"] is True
        assert 0 < len(record["entry"]) <= 300
        assert entry.startswith(record["entry"].encode())  # says what the entry was
    peak_mb = peak_kb / 1024  # kilobytes on Linux
    print(f"peak RSS {peak_mb:.0f} MB")
    assert peak_mb < 100, f"peak RSS {peak_mb:.0f} MB"
