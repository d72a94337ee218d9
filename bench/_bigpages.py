"""A site of big pages that arrive together: the memory row of ``synthetic.py --memory``.

`write_big_site` writes ``index.html`` linking to ``k`` pages of ``lo_mb``-``hi_mb`` MB each
(decimal MB, sizes drawn from a seed, all under crawlq's default 10 MiB body cap), so a crawl
at concurrency 16 has 16 of them in flight at once: the case where rust-doc's 5-10 MB pages
pushed crawlq's peak RSS to 384-399 MB (issue 25). Each big page is dense markup like
rust-doc's item lists: one ``<li>`` with a link and a ``<span>`` every ~110 bytes (45,000-90,000
elements a page), each link to another big page or to the index, with a fragment
(so the tree, the link walk and dedup all see the whole page, up to crawlq's own cut at
``max_links_per_page``); every link inside the site: the reachable set is exactly ``k + 1``.
Served by nginx over the files like any directory corpus (`_harness.CorpusServer`).
"""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["MAX_PAGE_BYTES", "write_big_site"]

MAX_PAGE_BYTES = 10 * 1024 * 1024 - 64 * 1024  # below crawlq's max_body_bytes (10 MiB)
_WORD_LIST = ("crawl", "frontier", "lease", "politeness", "robots", "store", "fetch", "parse")


def _page(i: int, k: int, size: int, rng: random.Random) -> bytes:
    head = f"<!DOCTYPE html><html><head><title>big page {i}</title></head><body><h1>{i}</h1>\n"
    chunks = [head, "<ul>\n"]
    written = len(head)
    n = 0
    while written < size - 200:  # one list item is ~110 bytes: the size overshoots by less
        target = f"b{rng.randrange(k)}.html" if n % 8 else "index.html"
        word = _WORD_LIST[n % len(_WORD_LIST)]
        chunk = (
            f'<li class="item"><a href="{target}#i{n}">{word}::{n}</a>'
            f"<span class=desc>{word} item {n} of page {i}</span></li>\n"
        )
        chunks.append(chunk)
        written += len(chunk)
        n += 1
    chunks.append("</ul></body></html>\n")
    return "".join(chunks).encode()


def write_big_site(root: Path, k: int, lo_mb: float, hi_mb: float, seed: int = 25) -> int:
    """Write the index and ``k`` big pages under ``root``; returns the reachable pages (k + 1)."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    links = "".join(f'<li><a href="b{i}.html">big {i}</a></li>\n' for i in range(k))
    (root / "index.html").write_text(
        f"<!DOCTYPE html><html><head><title>big pages</title></head><body><ul>\n{links}</ul>"
        "</body></html>\n"
    )
    for i in range(k):
        size = min(int(rng.uniform(lo_mb, hi_mb) * 1_000_000), MAX_PAGE_BYTES)
        (root / f"b{i}.html").write_bytes(_page(i, k, size, rng))
    root.chmod(0o755)
    return k + 1
