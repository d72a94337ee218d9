"""Benchmark: crawl the synthetic site (`crawlq.testing.SyntheticSite`) at several sizes and hosts.

    python bench/synthetic.py [--pages 20000] [--hosts 1 8] [--rows embedded redis1 redis2]
    python bench/synthetic.py --pages 20000 100000 --hosts 8     # the memory check, slow
    python bench/synthetic.py --load-test                         # the server's own speed
    python bench/synthetic.py --memory                            # big pages + 100k pages
    python bench/synthetic.py --memory --pages 2000 --big-pages 8 --big-mb 1-2   # a quick look

For each (pages, hosts) the synthetic server runs in its own process (pages generated per
request from a seed, 5-60 kB, 20-200 links, links across all hosts), and each row crawls it
once with concurrency 16 and politeness off (``--delay 0``, host concurrency = total
concurrency), in scope all the hosts. A run counts only when it stored exactly the server's
reachable page count. Prints pages/s, CPU, peak RSS of any one process (the worker memory
that must not grow with the number of pages) and the Redis P=2 / P=1 speed-up.

``--redis-hosts`` limits the Redis (and Celery) rows to those host counts (default: all).
``--memory`` runs the memory rows (default rows: crawlq embedded and the bare loop): first the
**big-page site** (`_bigpages`: an index linking to ``--big-pages`` pages of ``--big-mb``
MB, 48 of 5-10 MB by default, so 16 arrive together at concurrency 16) served by nginx as a
directory, then the generated site at ``--pages`` (default 100,000 with ``--memory``) on
``--hosts`` (default 8), and closes with a memory table: peak RSS of any one crawler process
and of its tree, per row and site. The machine's speed and load are printed before and
after, and kept per run.

``--load-test`` measures the server instead: two client processes fetch random pages over
16 keep-alive connections each for a few seconds, and it reports the requests/s served and
the server's CPU per request.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import shutil
import tempfile
import time
from pathlib import Path

from _bigpages import write_big_site
from _crawlers import Result, Runner, Target, make_rows, row_name, run_round
from _harness import (
    DEFAULT_REDIS,
    CorpusServer,
    RedisProbe,
    SyntheticNginxServer,
    SyntheticServerProcess,
    git_state,
    machine_line,
    nginx_binary,
    port_range,
    precompile_crawlq,
    print_table,
    set_port_window,
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


def _summary_row(label: list[object], name: str, ok: list[Result], runs: int) -> list[object]:
    return [
        *label,
        name,
        f"{len(ok)}/{runs}",
        summary([r.pages_per_s for r in ok], ".0f"),
        summary([r.run.cpu_s for r in ok], ".1f"),
        summary([r.run.max_rss_mb for r in ok], ".0f"),
        summary([r.server_cpu_s for r in ok], ".1f"),
    ]


def crawl_site(
    label: str,
    server: SyntheticServerProcess | SyntheticNginxServer | CorpusServer,
    target: Target,
    rows: dict[str, Runner],
    rounds: int,
    work: Path,
) -> list[Round]:
    """Every row ``rounds`` times against one server (stopped after), with its tables."""
    done = []
    try:
        for i in range(rounds):
            done.append(run_round(rows, target, server, work, f"{label} #{i}", print_run))
    finally:
        server.stop()
    print(f"\n{label}: {server.kind}\n")
    summary_table(done, list(rows))
    ratio_table(done, [("crawlq redis P=2", "crawlq redis P=1")])
    print()
    return done


def memory_table(sites: list[tuple[str, list[Round]]]) -> None:
    """Per site and row: peak RSS of any one process and of the tree, with the pages/s."""
    out = []
    for label, rounds in sites:
        for name in rounds[0] if rounds else {}:
            ok = [rnd[name] for rnd in rounds if rnd[name].valid]
            out.append(
                [
                    label,
                    name,
                    f"{len(ok)}/{len(rounds)}",
                    summary([r.run.max_rss_mb for r in ok], ".0f"),
                    summary([r.run.tree_rss_mb for r in ok], ".0f"),
                    summary([r.pages_per_s for r in ok], ".0f"),
                    summary([r.run.cpu_s / r.pages * 1e6 for r in ok], ".0f"),
                    summary([r.speed_ms for r in ok], ".1f"),
                    summary([r.loadavg for r in ok]),
                ]
            )
    print("memory: peak RSS of any one crawler process and of its process tree\n")
    header = ["site", "row", "valid", "peak RSS MB", "tree RSS MB", "pages/s", "CPU µs/page"]
    print_table([*header, "timeit ms", "loadavg"], out)
    print()


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", help="default 20000 (100000 with --memory)")
    parser.add_argument("--hosts", type=int, nargs="+", help="default 1 8 (8 with --memory)")
    parser.add_argument(
        "--rows",
        nargs="+",
        type=row_name,
        help="rows, in order: embedded, redisP (P processes), celery, scrapy, crawlee, bare "
        "(default: embedded redis1 redis2; embedded bare with --memory)",
    )
    parser.add_argument("--redis-hosts", type=int, nargs="+", help="host counts for Redis rows")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--load-test", action="store_true", help="measure the server only")
    parser.add_argument("--memory", action="store_true", help="the big-page and 100k-page rows")
    parser.add_argument("--big-pages", type=int, default=48, help="big pages (--memory)")
    parser.add_argument("--big-mb", default="5-10", help="their size range in MB (--memory)")
    parser.add_argument(
        "--sites",
        nargs="+",
        choices=["big", "generated"],
        default=["big", "generated"],
        help="with --memory: the big-page site, the generated site, or both (default)",
    )
    parser.add_argument("--port-range", type=port_range, metavar="LO-HI")
    parser.add_argument(
        "--asyncio-server",
        action="store_true",
        help="serve pages generated per request (default: nginx over files written once, "
        "when nginx is installed)",
    )
    parser.add_argument("--json", type=Path, help="also write every run to this JSON file")
    args = parser.parse_args()
    args.pages = args.pages or [100_000 if args.memory else 20_000]
    args.hosts = args.hosts or ([8] if args.memory else [1, 8])
    args.rows = args.rows or (["embedded", "bare"] if args.memory else DEFAULT_SYNTHETIC_ROWS)
    return args


DEFAULT_SYNTHETIC_ROWS = ["embedded", "redis1", "redis2"]


def main() -> None:
    args = _parse_args()
    set_port_window(args.port_range)
    with tempfile.TemporaryDirectory(prefix="crawlq-synthetic-") as tmp:
        work = Path(tmp)
        if args.load_test:
            for hosts in args.hosts:
                load_test(args.pages[0], hosts, 2, 5.0, work)
            return
        needs_redis = any(r.startswith(("redis", "celery")) for r in args.rows)
        probe = RedisProbe(args.redis) if needs_redis else None
        precompile_crawlq()
        info = versions() | {"redis-server": probe.version if probe else "-", "git": git_state()}
        print(
            time.strftime("%Y-%m-%d %H:%M:%S %Z  ") + "  ".join(f"{k} {v}" for k, v in info.items())
        )
        info["machine at start"] = machine_line()
        print(info["machine at start"], flush=True)
        all_rounds: list[tuple[str, Round]] = []
        sites: list[tuple[str, list[Round]]] = []
        summaries = []
        if args.memory and "big" in args.sites:
            lo, _, hi = args.big_mb.partition("-")
            site = work / "big-pages"
            expected = write_big_site(site, args.big_pages, float(lo), float(hi or lo))
            label = f"big pages: {args.big_pages} x {args.big_mb} MB"
            server = CorpusServer(site, work)
            target = Target(server.url, ["127.0.0.1"], expected)
            done = crawl_site(label, server, target, make_rows(args.rows, probe), 1, work)
            sites.append((label, done))
            all_rounds += [(label, rnd) for rnd in done]
            shutil.rmtree(site, ignore_errors=True)
        generated = not args.memory or "generated" in args.sites
        for n_pages in args.pages if generated else []:
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
                done = crawl_site(label, server, target, rows, args.rounds, work)
                sites.append((label, done))
                all_rounds += [(label, rnd) for rnd in done]
                for name in rows:
                    ok = [rnd[name] for rnd in done if rnd[name].valid]
                    summaries.append(_summary_row([n_pages, hosts], name, ok, len(done)))
        if probe:
            probe.close()
    print("all sizes: pages/s, CPU s of the crawler tree, peak RSS of any one crawler process\n")
    header = ["pages", "hosts", "row", "valid", "pages/s", "CPU s", "peak RSS MB", "server CPU s"]
    print_table(header, summaries)
    print()
    if args.memory:
        memory_table(sites)
    print(f"git at start: {info['git']}; at end: {git_state()}")
    info["machine at end"] = machine_line()
    print(f"{info['machine at start']} (start)\n{info['machine at end']} (end)")
    if args.json:
        write_json(args.json, info, all_rounds)


if __name__ == "__main__":
    main()
