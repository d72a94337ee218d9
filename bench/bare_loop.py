"""The floor: a bare asyncio + aiohttp + selectolax crawler, as fast as plain Python gets.

    python bench/bare_loop.py http://127.0.0.1:8000/index.html [--concurrency 16] [--allow-host H]
        [--urls-out URLS.txt]

One ClientSession, a fixed pool of ``--concurrency`` worker tasks on an asyncio.Queue, an
in-memory set of seen URLs (fragments stripped), links from selectolax ``css('a[href]')``
resolved with urljoin (``<base href>`` honoured), followed when http(s) on an allowed host
(the seed's host, plus ``--allow-host``). No store, no politeness, no retries, no robots.txt.
Prints ``pages: N`` (distinct URLs fetched with status 200), then errors and elapsed seconds.
``--urls-out`` also writes those URLs, one a line (the list ``fetch_only.py`` fetches).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from urllib.parse import urljoin, urlsplit

import aiohttp
from selectolax.lexbor import LexborHTMLParser as HTMLParser


def parse(body: bytes) -> HTMLParser:
    """The lexbor tree of a page (a function of its own so a profile can tell it apart)."""
    return HTMLParser(body)


def page_links(tree: HTMLParser, url: str) -> list[str]:
    """The page's ``a[href]`` links resolved against its base, fragments stripped."""
    base = tree.css_first("base[href]")
    base_url = urljoin(url, base.attributes["href"] or "") if base else url
    return [
        urljoin(base_url, a.attributes["href"] or "").split("#", 1)[0] for a in tree.css("a[href]")
    ]


async def crawl(
    seed: str, hosts: set[str], concurrency: int, fetched: list[str] | None = None
) -> tuple[int, int]:
    seed = seed.split("#", 1)[0]
    seen = {seed}
    queue: asyncio.Queue[str] = asyncio.Queue()
    queue.put_nowait(seed)
    pages = errors = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal pages, errors
        while True:
            url = await queue.get()
            try:
                async with session.get(url) as resp:
                    body = await resp.read()
                    ok = resp.status == 200
                    html = ok and resp.content_type == "text/html"
                if ok:
                    pages += 1
                    if fetched is not None:
                        fetched.append(url)
                else:
                    errors += 1
                if html:
                    for link in page_links(parse(body), url):
                        if link not in seen:
                            parts = urlsplit(link)
                            if parts.scheme in ("http", "https") and parts.hostname in hosts:
                                seen.add(link)
                                queue.put_nowait(link)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                errors += 1
                print(f"{url}: {exc!r}", file=sys.stderr)
            finally:
                queue.task_done()

    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        workers = [asyncio.create_task(worker(session)) for _ in range(concurrency)]
        await queue.join()
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return pages, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seed")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--allow-host", action="append", default=[], help="repeatable")
    parser.add_argument("--urls-out", help="write the URLs fetched with status 200 here")
    args = parser.parse_args()
    hosts = {urlsplit(args.seed).hostname or "", *args.allow_host}
    fetched: list[str] | None = [] if args.urls_out else None
    start = time.perf_counter()
    pages, errors = asyncio.run(crawl(args.seed, hosts, args.concurrency, fetched))
    elapsed = time.perf_counter() - start
    if args.urls_out and fetched is not None:
        with open(args.urls_out, "w") as out:
            out.writelines(f"{url}\n" for url in fetched)
    print(
        f"pages: {pages}\nerrors: {errors}\nelapsed: {elapsed:.2f}s, {pages / elapsed:.0f} pages/s"
    )


if __name__ == "__main__":
    main()
