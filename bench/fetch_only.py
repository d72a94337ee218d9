"""The ceiling: fetch a known list of URLs with aiohttp and parse nothing.

    python bench/fetch_only.py URLS.txt [--concurrency 16]

``URLS.txt`` holds one URL a line: the pages a crawl of the site reaches (``compare.py``
writes it with ``bare_loop.py --urls-out`` before the first round). One ClientSession, a
fixed pool of ``--concurrency`` worker tasks taking URLs from a list, each body read whole
and dropped: no parsing, no link extraction, no dedup, no store. What is left is the cost
of HTTP in Python, the figure no crawler on aiohttp can beat. Prints ``pages: N`` (distinct
URLs fetched with status 200), errors, and elapsed seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import aiohttp


async def fetch_all(urls: list[str], concurrency: int) -> tuple[int, int]:
    todo = iter(urls)
    ok: set[str] = set()
    errors = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal errors
        for url in todo:  # one shared iterator: each URL goes to exactly one worker
            try:
                async with session.get(url) as resp:
                    await resp.read()
                    if resp.status == 200:
                        ok.add(url)
                    else:
                        errors += 1
            except (TimeoutError, aiohttp.ClientError) as exc:
                errors += 1
                print(f"{url}: {exc!r}", file=sys.stderr)

    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return len(ok), errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", type=Path, help="one URL a line")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    urls = [line.strip() for line in args.urls.read_text().splitlines() if line.strip()]
    start = time.perf_counter()
    pages, errors = asyncio.run(fetch_all(urls, args.concurrency))
    elapsed = time.perf_counter() - start
    print(
        f"pages: {pages}\nerrors: {errors}\nelapsed: {elapsed:.2f}s, {pages / elapsed:.0f} pages/s"
    )


if __name__ == "__main__":
    main()
