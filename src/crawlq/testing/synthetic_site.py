"""`SyntheticSite`: a website of N pages generated on request, for benchmarks and large crawls.

`SyntheticSite` is the model: page ``i`` (0 <= i < N) is a pure function of ``(seed, i)`` and
the base URLs of the hosts, so nothing is written to disk and the same seed serves the same
bytes every time. Page 0 is ``/`` on the first host; page ``i > 0`` is
``/s{i // 100}/p{i}.html`` on host ``(i // 100) % H``, and a page has that one URL only (the
other hosts answer 404 for it), so the reachable set is exactly N URLs. Each page:

- is 5,000-60,000 bytes (HTML), skewed towards the small end (median about 18 kB);
- has 20-200 ``<a href>`` links: its tree children ``F*i + 1 .. F*i + F`` (``F`` = 8, so every
  page is reachable from ``/``), random other pages, a few duplicates of those (in another
  form, or with a fragment), and one off-site link (``http://offsite.invalid/``) that a
  crawler must not follow;
- writes each in-site link in one of several forms: relative (``p7.html``, ``../s3/p312.html``,
  ``./p8.html``), root-relative (``/s3/p312.html``), or absolute (``http://127.0.0.2:PORT/…``),
  always absolute when the target lives on another host, so links cross hosts.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from crawlq.errors import ConfigError

__all__ = ["SyntheticSite"]

_SECTION = 100  # pages per /s{k}/ folder
_CHILDREN = 8  # tree children per page: page i links to 8i+1 .. 8i+8
_MIN_BYTES, _MAX_BYTES = 5_000, 60_000
_MIN_LINKS, _MAX_LINKS = 20, 200
_OFFSITE = "http://offsite.invalid/elsewhere.html"
_PATH = re.compile(rb"/s(\d+)/p(\d+)\.html")
_WORDS = (
    "query index table tuple vacuum planner lock page buffer heap btree merge join scan "
    "function trigger schema role grant column row insert update delete select transaction "
    "commit rollback snapshot replica archive checkpoint segment cursor operator aggregate"
)


def _filler(n_bytes: int, seed: int) -> str:
    rng = random.Random(seed)
    vocabulary = _WORDS.split()
    words: list[str] = []
    size = 0
    while size < n_bytes:
        word = rng.choice(vocabulary)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


class SyntheticSite:
    """The pages of a synthetic site: deterministic HTML from ``(seed, page id)``.

    Args:
        n_pages: Number of pages, all reachable from ``/`` (at least 1).
        base_urls: ``http://host:port`` of each host, without a trailing slash (at least one);
            page ``i > 0`` lives on host ``(i // 100) % len(base_urls)``, page 0 on the first.
        seed: Seed of the link pattern, sizes and text.

    Raises:
        ConfigError: ``n_pages`` < 1, or no base URL (the message names the argument).
    """

    def __init__(self, n_pages: int, base_urls: Sequence[str], seed: int = 1) -> None:
        if n_pages < 1:
            raise ConfigError("n_pages", f"must be at least 1, got {n_pages}")
        if not base_urls:
            raise ConfigError("base_urls", "must name at least one host")
        self.n_pages = n_pages
        self.base_urls = tuple(u.rstrip("/") for u in base_urls)
        self.seed = seed
        self._filler = _filler(2 * _MAX_BYTES, seed)

    @property
    def reachable_pages(self) -> int:
        """Number of distinct page URLs reachable from `root_url` (exactly ``n_pages``)."""
        return self.n_pages

    @property
    def root_url(self) -> str:
        """The URL of page 0, where a crawl starts."""
        return self.base_urls[0] + "/"

    def host_of(self, page_id: int) -> int:
        """Index in `base_urls` of the host serving ``page_id``."""
        return (page_id // _SECTION) % len(self.base_urls) if page_id else 0

    def path_of(self, page_id: int) -> str:
        """Path of ``page_id``: ``/`` for page 0, else ``/s{i // 100}/p{i}.html``."""
        return f"/s{page_id // _SECTION}/p{page_id}.html" if page_id else "/"

    def url_of(self, page_id: int) -> str:
        """Absolute URL of ``page_id``."""
        return self.base_urls[self.host_of(page_id)] + self.path_of(page_id)

    def page_at(self, host: int, path: bytes) -> int | None:
        """The page id served at ``path`` on host ``host`` (an index into `base_urls`), if any.

        Args:
            host: Index of the host asked.
            path: Request path (no query string), as bytes.

        Returns:
            The page id, or None when no page lives there (answer 404).
        """
        if path == b"/":
            return 0 if host == 0 else None
        match = _PATH.fullmatch(path)
        if match is None:
            return None
        section, page_id = int(match[1]), int(match[2])
        if not 0 < page_id < self.n_pages or section != page_id // _SECTION:
            return None
        if match[2].startswith(b"0") or self.host_of(page_id) != host:
            return None
        return page_id

    def links_of(self, page_id: int) -> list[int]:
        """Ids of the in-site pages ``page_id`` links to, duplicates included, in page order."""
        return [target for target, _ in self._plan(page_id)[0]]

    def page(self, page_id: int) -> bytes:
        """The HTML of ``page_id``, UTF-8 encoded.

        Raises:
            ConfigError: ``page_id`` is not in ``0 .. n_pages - 1``.
        """
        if not 0 <= page_id < self.n_pages:
            raise ConfigError("page_id", f"must be in 0..{self.n_pages - 1}, got {page_id}")
        links, size, rng = self._plan(page_id)
        here_host, here_path = self.host_of(page_id), self.path_of(page_id)
        items = [
            f'<li><a href="{self._href(t, here_host, here_path, form)}">Page {t}</a></li>'
            for t, form in links
        ]
        items.insert(rng.randrange(len(items) + 1), f'<li><a href="{_OFFSITE}">elsewhere</a></li>')
        head = (
            f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Synthetic page {page_id}'
            f'</title><link rel="stylesheet" href="/style.css"></head><body><h1>Page {page_id}'
            "</h1>"
        )
        cut = len(items) // 2
        nav = "<ul>" + "".join(items[:cut]) + "</ul>"
        more = "<ul>" + "".join(items[cut:]) + "</ul></body></html>"
        text_len = max(0, size - len(head) - len(nav) - len(more) - 14)
        start = rng.randrange(len(self._filler) - text_len) if text_len else 0
        text = self._filler[start : start + text_len]
        half = text_len // 2
        return f"{head}{nav}<p>{text[:half]}</p><p>{text[half:]}</p>{more}".encode()

    def _plan(self, page_id: int) -> tuple[list[tuple[int, int]], int, random.Random]:
        """(target, form) per in-site link, the page's size in bytes, and its RNG for the rest."""
        rng = random.Random(self.seed * 1_000_003 + page_id)
        n_links = _MIN_LINKS + int((_MAX_LINKS - _MIN_LINKS) * rng.random() ** 2)
        size = _MIN_BYTES + int((_MAX_BYTES - _MIN_BYTES) * rng.random() ** 2)
        first = page_id * _CHILDREN + 1
        targets = list(range(first, min(first + _CHILDREN, self.n_pages)))
        n_dups = n_links // 10
        n = self.n_pages
        targets += [rng.randrange(n) for _ in range(n_links - 1 - n_dups - len(targets))]
        targets += [targets[rng.randrange(len(targets))] for _ in range(n_dups)]
        return [(t, rng.randrange(6)) for t in targets], size, rng

    def _href(self, target: int, here_host: int, here_path: str, form: int) -> str:
        path = self.path_of(target)
        there = self.host_of(target)
        if there != here_host or form == 0:
            return self.base_urls[there] + path
        if form == 1 or target == 0:
            return path
        rel = path[1:]
        if here_path != "/":
            here_section = here_path.split("/")[1]
            name = rel.split("/")[1]
            if rel.startswith(here_section + "/"):
                rel = name if form != 2 else "./" + name
            else:
                rel = "../" + rel
        return rel + ("#part" if form == 5 else "")
