"""The reader of text sitemaps: one URL per line, UTF-8 (sitemaps.org "Other formats").

Past ``max_urls`` URLs the rest is only counted (non-blank lines, by a byte scan); a line
longer than `MAX_VALUE_CHARS` or holding a NUL is counted ``invalid``.
"""

from __future__ import annotations

import re

from crawlq.sitemap.model import MAX_VALUE_CHARS, Sitemap, SitemapEntry, SitemapKind

__all__ = ["TextReader"]

_BLANK_LINE = re.compile(rb"^[ \t\r\f\v]*\n", re.MULTILINE)


class TextReader:
    """A reader of text sitemaps: one URL per line, UTF-8 (sitemaps.org).

    Past ``max_urls`` URLs the rest is only counted: non-blank lines, by a byte scan.
    """

    def __init__(self, sitemap: Sitemap, max_urls: int) -> None:
        sitemap.kind = SitemapKind.TEXT
        self.sitemap = sitemap
        self.max_urls = max_urls
        self.failed = False
        self.carry = b""

    def feed(self, data: bytes) -> None:
        """Read the whole lines of ``data``; a partial last line waits for the next chunk."""
        data = self.carry + data
        cut = data.rfind(b"\n") + 1
        self.carry = data[cut:]
        if len(self.carry) > MAX_VALUE_CHARS * 4:  # no URL is that long: keep memory bounded
            self.carry = b"\0"  # the rest of the line is dropped with it (invalid)
        if len(self.sitemap.entries) >= self.max_urls:
            self._count(data, cut)
            return
        lines = data[:cut].split(b"\n")
        for n, line in enumerate(lines):
            self._line(line)
            if len(self.sitemap.entries) >= self.max_urls:
                self.sitemap.found += sum(1 for rest in lines[n + 1 :] if rest.strip())
                return

    def close(self) -> None:
        """Read the last line (one without a newline)."""
        if len(self.sitemap.entries) >= self.max_urls:
            self.sitemap.found += bool(self.carry.strip())
        else:
            self._line(self.carry)
        self.carry = b""

    def _count(self, data: bytes, end: int) -> None:
        lines = data.count(b"\n", 0, end)
        self.sitemap.found += lines - len(_BLANK_LINE.findall(data, 0, end))

    def _line(self, raw: bytes) -> None:
        line = raw.strip()
        if not line:
            return
        text = line.decode("utf-8", errors="replace")
        if len(text) > MAX_VALUE_CHARS or "\0" in text:
            self.sitemap.invalid += 1
            return
        self.sitemap.found += 1
        if len(self.sitemap.entries) < self.max_urls:
            self.sitemap.entries.append(SitemapEntry(text))
