"""Benchmark: crawl the synthetic site (`crawlq.testing.SyntheticSite`) at several sizes and hosts.

    python bench/synthetic.py [--pages 20000] [--hosts 1 8] [--rows embedded redis1 redis2]
    python bench/synthetic.py --pages 20000 100000 --hosts 8     # the memory check, slow
    python bench/synthetic.py --load-test                         # the server's own speed

For each (pages, hosts) the synthetic server runs in its own process (pages generated per
request from a seed, 5-60 kB, 20-200 links, links across all hosts), and each row crawls it
once with concurrency 16 and politeness off (``--delay 0``, host concurrency = total
concurrency), in scope all the hosts. A run counts only when it stored exactly the server's
reachable page count. Prints pages/s, CPU, peak RSS of any one process (the worker memory
that must not grow with the number of pages) and the Redis P=2 / P=1 speed-up.

``--redis-hosts`` limits the Redis (and Celery) rows to those host counts (default: all).
``--load-test`` measures the server instead: two client processes fetch random pages over
16 keep-alive connections each for a few seconds, and it reports the requests/s served and
the server's CPU per request.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import tempfile
import time
from pathlib import Path

from _crawlers import Target, make_rows, row_name, run_round
from _harness import (
    DEFAULT_REDIS,
    RedisProbe,
    SyntheticNginxServer,
    SyntheticServerProcess,
    git_state,
    nginx_binary,
    precompile_crawlq,
    print_table,
    summary,
    versions,
)
from _report import Round, print_run, ratio_table, summary_table, write_json

from crawlq.testing.synthetic import SyntheticSite


def _load_client(base_urls: list[str], n_pages: int, duration_s: float, out: list[int]) -> None:
    import aiohttp

    site = SyntheticSite(n_pages, base_urls)

    async def run() -> int:
        done = 0
        deadline = time.monotonic() + duration_s
        rng = random.Random()
        connector = aiohttp.TCPConnector(limit=16 * len(base_urls), limit_per_host=16)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def one() -> None:
                nonlocal done
                while time.monotonic() < deadline:
                    async with session.get(site.url_of(rng.randrange(n_pages))) as resp:
                        await resp.read()
                        assert resp.status == 200
                    done += 1

            await asyncio.gather(*(one() for _ in range(16)))
        return done

    out.append(asyncio.run(run()))


def load_test(n_pages: int, hosts: int, clients: int, duration_s: float, work: Path) -> None:
    server = SyntheticServerProcess(n_pages, hosts, work)
    try:
        base_urls = [f"http://{h}:{server.port}" for h in server.hosts]
        with multiprocessing.Manager() as manager:
            out = manager.list()
            cpu_before = server.cpu_s()
            start = time.perf_counter()
            procs = [
                multiprocessing.Process(
                    target=_load_client, args=(base_urls, n_pages, duration_s, out)
                )
                for _ in range(clients)
            ]
            for p in procs:
                p.start()
            for p in procs:
                p.join()
            wall = time.perf_counter() - start
            cpu = server.cpu_s() - cpu_before
            total = sum(out)
    finally:
        server.stop()
    print(
        f"synthetic server, {n_pages} pages on {hosts} host(s): {total} requests in {wall:.1f} s "
        f"by {clients} client processes x 16 connections = {total / wall:.0f} requests/s; "
        f"server CPU {cpu:.2f} s = {1000 * cpu / total:.3f} ms per request "
        f"(one core could serve {total / cpu:.0f} requests/s)"
    )


def make_server(
    n_pages: int, hosts: int, work: Path, asyncio_server: bool
) -> SyntheticServerProcess | SyntheticNginxServer:
    """nginx over files written once when installed (and not refused), else the asyncio one."""
    if asyncio_server or nginx_binary() is None:
        return SyntheticServerProcess(n_pages, hosts, work)
    started = time.perf_counter()
    server = SyntheticNginxServer(n_pages, hosts, work)
    print(f"wrote {n_pages} pages for nginx in {time.perf_counter() - started:.1f} s")
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[20_000])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--rows",
        nargs="+",
        default=["embedded", "redis1", "redis2"],
        type=row_name,
        help="rows, in order: embedded, redisP (P processes), celery, scrapy, bare",
    )
    parser.add_argument("--redis-hosts", type=int, nargs="+", help="host counts for Redis rows")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--load-test", action="store_true", help="measure the server only")
    parser.add_argument(
        "--asyncio-server",
        action="store_true",
        help="serve pages generated per request (default: nginx over files written once, "
        "when nginx is installed)",
    )
    parser.add_argument("--json", type=Path, help="also write every run to this JSON file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="crawlq-synthetic-") as tmp:
        work = Path(tmp)
        if args.load_test:
            for hosts in args.hosts:
                load_test(args.pages[0], hosts, 2, 5.0, work)
            return
        probe = (
            RedisProbe(args.redis)
            if any(r.startswith(("redis", "celery")) for r in args.rows)
            else None
        )
        precompile_crawlq()
        info = versions() | {"redis-server": probe.version if probe else "-", "git": git_state()}
        print(
            time.strftime("%Y-%m-%d %H:%M:%S %Z  ") + "  ".join(f"{k} {v}" for k, v in info.items())
        )
        all_rounds: list[tuple[str, Round]] = []
        summaries = []
        for n_pages in args.pages:
            for hosts in args.hosts:
                names = [
                    r
                    for r in args.rows
                    if not r.startswith(("redis", "celery"))
                    or not args.redis_hosts
                    or hosts in args.redis_hosts
                ]
                rows = make_rows(names, probe)
                server = make_server(n_pages, hosts, work, args.asyncio_server)
                label = f"N={n_pages} H={hosts}"
                target = Target(server.url, server.hosts, n_pages)
                rounds = []
                try:
                    for i in range(args.rounds):
                        rounds.append(
                            run_round(rows, target, server, work, f"{label} #{i}", print_run)
                        )
                finally:
                    server.stop()
                print(f"\n{label}: {server.kind}\n")
                summary_table(rounds, list(rows))
                ratio_table(rounds, [("crawlq redis P=2", "crawlq redis P=1")])
                print()
                all_rounds += [(label, rnd) for rnd in rounds]
                for name in rows:
                    ok = [rnd[name] for rnd in rounds if rnd[name].valid]
                    summaries.append(
                        [
                            n_pages,
                            hosts,
                            name,
                            f"{len(ok)}/{len(rounds)}",
                            summary([r.pages_per_s for r in ok], ".0f"),
                            summary([r.run.cpu_s for r in ok], ".1f"),
                            summary([r.run.max_rss_mb for r in ok], ".0f"),
                            summary([r.server_cpu_s for r in ok], ".1f"),
                        ]
                    )
        if probe:
            probe.close()
    print("all sizes: pages/s, CPU s of the crawler tree, peak RSS of any one crawler process\n")
    header = ["pages", "hosts", "row", "valid", "pages/s", "CPU s", "peak RSS MB", "server CPU s"]
    print_table(header, summaries)
    print(f"\ngit at start: {info['git']}; at end: {git_state()}")
    if args.json:
        write_json(args.json, info, all_rounds)


if __name__ == "__main__":
    main()
