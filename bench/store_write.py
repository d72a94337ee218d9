"""Benchmark: the result stores and the WARC writer.

1. Batch writer: rows/s of `Store.write` with batches of 1,000 page records, SQLite vs
   PostgreSQL, first as new rows and then as overwrites of the same fingerprints (a
   re-delivery), pages alone and pages with one item each.
2. WARC: every HTML page of the PostgreSQL manual fetched once from a loopback server, then
   written with `WarcWriter`: bytes of WARC per page, pages/s of the writer.
3. Crawl (``--crawl``): the manual crawled by 2 ``crawlq worker`` processes on one Redis job,
   store SQLite vs PostgreSQL, without and with ``--warc``: pages/s (wall clock).

    python bench/store_write.py [--batches 20] [--crawl] [--rounds 1]
        [--postgres postgresql://postgres@127.0.0.1:5432/test] [--redis redis://127.0.0.1:6379/14]

PostgreSQL tables go to a schema of their own, dropped at the end. Run by hand; never part of
the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import redis
from psycopg import sql

from crawlq.fetch import Fetcher
from crawlq.frontier.redis import Keyspace
from crawlq.records import ItemRecord, PageRecord
from crawlq.store import ResultBatch, Store, open_store
from crawlq.store.warc import WarcWriter
from crawlq.testing import ServerThread, make_static_app
from crawlq.testing.static import unpack_corpus
from crawlq.web.addresses import AddressGuard

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "postgresql-15-docs.tar.gz"
BATCH = 1000


def page(n: int, run: str) -> PageRecord:
    url = f"https://bench.test/{run}/{n}.html"
    return PageRecord(
        fingerprint=hashlib.sha1(url.encode()).digest(),
        url=url,
        final_url=url,
        status=200,
        content_type="text/html",
        depth=n % 7,
        title=f"Page {n} of the benchmark",
        fetched_at=time.time(),
        size_bytes=20_000 + n % 5000,
        elapsed_s=0.01,
        attempt=1,
        spider="bench",
        warc_file="crawlq-20261129000000000000-bench-1-00001.warc.gz",
        warc_offset=n * 7000,
    )


def batches(count: int, run: str, items: bool) -> list[ResultBatch]:
    out = []
    for b in range(count):
        pages = [page(b * BATCH + i, run) for i in range(BATCH)]
        its = [
            ItemRecord(p.fingerprint, 0, p.url, "bench", {"title": p.title, "n": i}, p.fetched_at)
            for i, p in enumerate(pages)
        ]
        out.append(ResultBatch(pages=pages, items=its if items else ()))
    return out


async def time_writes(store: Store, work: list[ResultBatch]) -> float:
    start = time.perf_counter()
    for batch in work:
        await store.write(batch)
    return time.perf_counter() - start


async def bench_writer(postgres_url: str, count: int) -> None:
    print(f"batch writer: {count} batches of {BATCH} pages each")
    print(f"{'store':<11} {'records':<14} {'new rows/s':>11} {'overwrite rows/s':>17}")
    schema = f"bench_{secrets.token_hex(4)}"
    tmp = Path(tempfile.mkdtemp(prefix="crawlq-bench-"))
    try:
        for name, url in (
            ("sqlite", str(tmp / "bench.db")),
            ("postgresql", f"{postgres_url}?options=-csearch_path%3D{schema}"),
        ):
            for items in (False, True):
                store = await open_store(url)
                try:
                    work = batches(count, uuid.uuid4().hex[:8], items)
                    new = await time_writes(store, work)
                    again = await time_writes(store, work)
                finally:
                    await store.close()
                rows = count * BATCH
                label = "pages+1 item" if items else "pages"
                print(f"{name:<11} {label:<14} {rows / new:>11,.0f} {rows / again:>17,.0f}")
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


async def bench_warc(root: Path) -> None:
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html"))
    with ServerThread(make_static_app(root)) as server:
        async with Fetcher(
            user_agent="crawlq-bench",
            max_connections=16,
            address_guard=AddressGuard(allow_private=True),  # loopback servers
        ) as fetcher:
            sem = asyncio.Semaphore(16)

            async def get(path: str):  # type: ignore[no-untyped-def]
                async with sem:
                    return await fetcher.fetch(f"{server.base_url}/{path}")

            results = await asyncio.gather(*(get(p) for p in files))
    out = Path(tempfile.mkdtemp(prefix="crawlq-bench-warc-"))
    writer = await WarcWriter.open(out)
    start = time.perf_counter()
    await asyncio.gather(*(writer.write(r, fetched_at=time.time()) for r in results))
    await writer.close()
    elapsed = time.perf_counter() - start
    size = sum(f.stat().st_size for f in out.iterdir())
    body = sum(len(r.body) for r in results)
    for f in out.iterdir():
        f.unlink()
    out.rmdir()
    print(
        f"WARC: {len(results)} pages, {body / len(results):,.0f} body bytes/page, "
        f"{size / len(results):,.0f} WARC bytes/page (request + response, gzip), "
        f"{len(results) / elapsed:,.0f} pages/s written ({body / elapsed / 1e6:.1f} MB/s of bodies)"
    )


def crawl_once(base: str, redis_url: str, store: str, warc: Path | None) -> tuple[int, float]:
    job = f"bench-{uuid.uuid4().hex[:8]}"
    crawlq = [sys.executable, "-m", "crawlq"]
    seed = [*crawlq, "seed", base + "/index.html", "--frontier", redis_url, "--job", job]
    seed += ["--store", store, "--delay", "0", "--host-concurrency", "32"]
    if warc is not None:
        seed += ["--warc", str(warc)]
    subprocess.run(seed, check=True, stdout=subprocess.DEVNULL)
    worker = [*crawlq, "worker", "--frontier", redis_url, "--job", job, "--exit-when-done", "-q"]
    start = time.perf_counter()
    procs = [subprocess.Popen(worker) for _ in range(2)]
    if any(p.wait() != 0 for p in procs):
        raise RuntimeError("a worker failed")
    elapsed = time.perf_counter() - start
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=Keyspace(job).pattern()):
        client.unlink(key)
    client.close()
    return asyncio.run(stored_pages(store)), elapsed


async def stored_pages(url: str) -> int:
    store = await open_store(url)
    try:
        return (await store.counts()).pages
    finally:
        await store.close()


def bench_crawl(root: Path, postgres_url: str, redis_url: str, rounds: int) -> None:
    print("crawl: the manual, 2 worker processes on one Redis job (pages/s, median of rounds)")
    tmp = Path(tempfile.mkdtemp(prefix="crawlq-bench-crawl-"))
    schemas: list[str] = []
    results: dict[str, list[float]] = {}
    pages = 0
    with ServerThread(make_static_app(root)) as server:
        for r in range(rounds):
            for name in ("sqlite", "postgresql", "sqlite+warc", "postgresql+warc"):
                if name.startswith("postgresql"):
                    schemas.append(f"bench_{secrets.token_hex(4)}")
                    store = f"{postgres_url}?options=-csearch_path%3D{schemas[-1]}"
                else:
                    store = str(tmp / f"{name}-{r}.db")
                warc = tmp / f"warc-{name}-{r}" if name.endswith("warc") else None
                pages, elapsed = crawl_once(server.base_url, redis_url, store, warc)
                results.setdefault(name, []).append(pages / elapsed)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    for name, rates in results.items():
        print(f"  {name:<16} {statistics.median(rates):8,.0f} pages/s ({pages} pages)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--crawl", action="store_true")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "CRAWLQ_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    args = parser.parse_args()
    asyncio.run(bench_writer(args.postgres, args.batches))
    with tempfile.TemporaryDirectory(prefix="crawlq-bench-site-") as tmp:
        root = unpack_corpus(CORPUS, Path(tmp))
        asyncio.run(bench_warc(root))
        if args.crawl:
            bench_crawl(root, args.postgres, args.redis, args.rounds)


if __name__ == "__main__":
    main()
