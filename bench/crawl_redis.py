"""Benchmark: the PostgreSQL manual crawled by 1, 2 and 4 worker processes on one Redis.

For each process count and round: a fresh job (and store), ``crawlq seed``, then P
``crawlq worker --exit-when-done`` processes started together. Reports pages, wall seconds,
pages/s, CPU seconds of all workers, peak RSS per worker, Redis CPU seconds and Redis
commands per page (from INFO), as median [min-max] over the rounds.

    python bench/crawl_redis.py [--rounds 3] [--processes 1 2 4] [--redis redis://127.0.0.1:6379/14]

Rounds alternate the process counts (1 2 4 1 2 4 ...) so machine drift hits all alike.
Run by hand; never part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis
from crawl_embedded import DEFAULT_CORPUS, Server, summary


def redis_counters(client: redis.Redis) -> tuple[int, float]:
    stats = client.info("stats")
    cpu = client.info("cpu")
    return int(stats["total_commands_processed"]), float(cpu["used_cpu_sys"]) + float(
        cpu["used_cpu_user"]
    )


def run_round(url: str, redis_url: str, processes: int, work: Path, concurrency: int) -> dict:
    job = f"bench-{uuid.uuid4().hex[:8]}"
    store = work / f"{job}.db"
    crawlq = [sys.executable, "-m", "crawlq"]
    subprocess.run(
        [*crawlq, "seed", url, "--frontier", redis_url, "--job", job, "--store", str(store),
         "--delay", "0", "--host-concurrency", str(concurrency * processes)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    commands_before, redis_cpu_before = redis_counters(client)
    start = time.perf_counter()
    worker = [*crawlq, "worker", "--frontier", redis_url, "--job", job, "--exit-when-done"]
    worker += ["-q", "--concurrency", str(concurrency)]
    procs = [subprocess.Popen(worker) for _ in range(processes)]
    cpu = 0.0
    rss = []
    for proc in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        if status != 0:
            raise RuntimeError(f"worker exited with status {status}")
        cpu += usage.ru_utime + usage.ru_stime
        rss.append(usage.ru_maxrss / 1024)
    wall = time.perf_counter() - start
    commands_after, redis_cpu_after = redis_counters(client)
    pages = int(client.hget(f"crawlq:{{{job}}}:stats", "done") or 0)
    for key in client.scan_iter(match=f"crawlq:{{{job}}}:*"):
        client.unlink(key)
    client.close()
    return {
        "pages": pages,
        "wall_s": wall,
        "pages_per_s": pages / wall,
        "cpu_s": cpu,
        "rss_mb_max": max(rss),
        "redis_cpu_s": redis_cpu_after - redis_cpu_before,
        "redis_cmds_per_page": (commands_after - commands_before) / max(pages, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--expect", type=int, default=1169)
    args = parser.parse_args()
    results: dict[int, list[dict]] = {p: [] for p in args.processes}
    with tempfile.TemporaryDirectory(prefix="crawlq-bench-") as tmp:
        work = Path(tmp)
        server = Server(args.corpus, work)
        try:
            for i in range(args.rounds):
                for p in args.processes:
                    r = run_round(server.url, args.redis, p, work, args.concurrency)
                    ok = r["pages"] == args.expect
                    print(
                        f"round {i} P={p}: {r['pages']} pages {r['wall_s']:.2f}s "
                        f"{r['pages_per_s']:.0f} pages/s cpu {r['cpu_s']:.2f}s "
                        f"rss {r['rss_mb_max']:.0f} MB redis cpu {r['redis_cpu_s']:.2f}s "
                        f"{r['redis_cmds_per_page']:.1f} cmds/page" + ("" if ok else " NOT COUNTED")
                    )
                    if ok:
                        results[p].append(r)
        finally:
            server.stop()
    print(f"\nserver: {server.kind}; concurrency {args.concurrency} per process")
    keys = ("wall_s", "pages_per_s", "cpu_s", "rss_mb_max", "redis_cpu_s", "redis_cmds_per_page")
    print("P  " + "  ".join(f"{k:>26}" for k in keys))
    for p, rounds in results.items():
        if rounds:
            print(f"{p}  " + "  ".join(f"{summary([r[k] for r in rounds]):>26}" for k in keys))
    base = results.get(1)
    if base:
        med1 = statistics.median(r["pages_per_s"] for r in base)
        for p, rounds in results.items():
            if rounds and p != 1:
                ratio = statistics.median(r["pages_per_s"] for r in rounds) / med1
                print(f"speed-up {p} processes / 1: {ratio:.2f}x")


if __name__ == "__main__":
    main()
