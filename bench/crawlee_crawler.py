"""The Crawlee-Python side of the comparison: a ParselCrawler over the seed's host(s).

    python bench/crawlee_crawler.py http://127.0.0.1:8000/index.html [--storage memory|default]
        [--concurrency 16] [--allow-host H] [--storage-dir DIR]

Runs with the Python of Crawlee's own venv (`_venvs.peer_python("crawlee")`), never with
crawlq's: it imports nothing from crawlq. ``--storage memory`` gives the crawler a
``MemoryStorageClient``; ``--storage default`` keeps Crawlee's default, the file-system
storage client, under ``--storage-dir`` (``CRAWLEE_STORAGE_DIR``, purged on start). Each
response pushes ``{url, status, title}`` to the default dataset (the start page too) and
enqueues every link whose host is the seed's or an ``--allow-host`` (all hosts on the seed's
port); concurrency fixed at ``--concurrency`` (min = desired = max, so the autoscaled pool
neither starts low nor backs off), 0 retries of a failed request, robots.txt not read,
everything else Crawlee's default (its default HTTP client included). Prints ``pages: N``
(distinct URLs in the dataset), ``records: N`` and ``elapsed: Xs`` (Crawlee's own
``crawler_runtime``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from urllib.parse import urlsplit


async def crawl(seed: str, hosts: set[str], concurrency: int, storage: str) -> None:
    from crawlee import ConcurrencySettings, Glob
    from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
    from crawlee.storage_clients import FileSystemStorageClient, MemoryStorageClient
    from crawlee.storages import Dataset

    client = MemoryStorageClient() if storage == "memory" else FileSystemStorageClient()
    crawler = ParselCrawler(
        storage_client=client,
        concurrency_settings=ConcurrencySettings(
            min_concurrency=concurrency,
            desired_concurrency=concurrency,
            max_concurrency=concurrency,
        ),
        max_request_retries=0,
        configure_logging=True,
    )
    port = urlsplit(seed).port
    include = [Glob(f"http://{h}:{port}/**") if port else Glob(f"http://{h}/**") for h in hosts]

    @crawler.router.default_handler
    async def handler(context: ParselCrawlingContext) -> None:
        title = context.selector.css("title::text").get()
        await context.push_data(
            {
                "url": context.request.url,
                "status": context.http_response.status_code,
                "title": title,
            }
        )
        await context.enqueue_links(strategy="all", include=include)  # type: ignore[arg-type]

    stats = await crawler.run([seed])
    dataset = await Dataset.open(storage_client=client)
    urls = [item["url"] async for item in dataset.iterate_items()]
    print(f"pages: {len(set(urls))}\nrecords: {len(urls)}")
    print(f"elapsed: {stats.crawler_runtime.total_seconds():.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seed")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--allow-host", action="append", default=[], help="repeatable")
    parser.add_argument("--storage", choices=("memory", "default"), default="memory")
    parser.add_argument("--storage-dir", type=Path, default=Path("crawlee-storage"))
    args = parser.parse_args()
    os.environ["CRAWLEE_STORAGE_DIR"] = str(args.storage_dir)
    os.environ["CRAWLEE_PURGE_ON_START"] = "true"
    hosts = {urlsplit(args.seed).hostname or "", *args.allow_host}
    start = time.perf_counter()
    asyncio.run(crawl(args.seed, hosts, args.concurrency, args.storage))
    print(f"wall in process: {time.perf_counter() - start:.2f}s")


if __name__ == "__main__":
    main()
