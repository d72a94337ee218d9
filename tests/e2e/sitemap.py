"""The set of pages a crawl of a static site must find, computed independently of crawlq.

A breadth-first walk over the files with the standard library's HTML parser: every
``<a href>`` / ``<area href>`` that resolves to a same-host http URL, fragment removed. This
is deliberately not crawlq's own link extractor, so the end-to-end tests compare crawlq
against a second implementation.
"""

from __future__ import annotations

from collections import deque
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

ASSET_SUFFIXES = (".png", ".jpg", ".gif", ".svg", ".css", ".js", ".pdf")


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "base" and values.get("href") and self.base is None:
            self.base = values["href"]
        if tag in ("a", "area") and values.get("href"):
            self.hrefs.append(values["href"] or "")


def reachable(root: Path, base_url: str) -> tuple[set[str], set[str]]:
    """Return (existing page URLs, missing URLs) reachable from ``base_url + 'index.html'``."""
    start = base_url + "index.html"
    host = urlsplit(start).netloc
    seen = {start}
    found: set[str] = set()
    missing: set[str] = set()
    queue = deque([start])
    while queue:
        url = queue.popleft()
        path = root / unquote(urlsplit(url).path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            missing.add(url)
            continue
        found.add(url)
        parser = _Hrefs()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        page_base = urljoin(url, parser.base) if parser.base else url
        for href in parser.hrefs:
            target, _ = urldefrag(urljoin(page_base, href.strip()))
            parts = urlsplit(target)
            if parts.scheme not in ("http", "https") or parts.netloc != host:
                continue
            if parts.path.lower().endswith(ASSET_SUFFIXES):
                continue
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return found, missing
