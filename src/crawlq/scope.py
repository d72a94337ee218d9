"""Which discovered links a crawl follows: domains, include/exclude patterns, depth, URL length.

Scope is decided before dedup, on every link a spider yields. A link out of scope is counted
by reason (`FilterReason`) but not recorded one by one: it never entered the crawl. URLs that
did enter the crawl and are then skipped (robots.txt) are recorded by the engine instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from urllib.parse import urlsplit

from crawlq.request import CrawlRequest

__all__ = ["FilterReason", "Scope"]

MAX_URL_LENGTH = 2083
"""Longest URL followed, in characters (the historical browser limit; Scrapy uses the same)."""
_HOST_CACHE_SIZE = 4096  # hosts whose scope answer is remembered; cleared when full


class FilterReason(StrEnum):
    """Why a URL was not followed or not fetched."""

    OFFSITE = "offsite"
    MAX_DEPTH = "max_depth"
    EXCLUDED = "excluded"
    NOT_INCLUDED = "not_included"
    URL_TOO_LONG = "url_too_long"
    ROBOTS_TXT = "robots_txt"
    PRIVATE_ADDRESS = "private_address"
    """The host is on a refused address (`crawlq.addresses`); nothing was sent to it."""


class Scope:
    """A compiled scope rule.

    Args:
        allowed_domains: Host names whose pages (and subdomains' pages) are followed; ports are
            ignored. Empty: every host is allowed.
        include: Regexes; when non-empty a URL must match one (``re.search``).
        exclude: Regexes; a URL matching any is not followed.
        max_depth: Deepest link depth followed (seeds are 0), or None for no limit.
    """

    def __init__(
        self,
        allowed_domains: Iterable[str] = (),
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        max_depth: int | None = None,
    ) -> None:
        self.allowed_domains = frozenset(_bare_host(d) for d in allowed_domains if d)
        self._include = [re.compile(p) for p in include]
        self._exclude = [re.compile(p) for p in exclude]
        self.max_depth = max_depth
        self._hosts_allowed: dict[str, bool] = {}  # host key -> allowed; few hosts per crawl

    def check(self, request: CrawlRequest) -> FilterReason | None:
        """Return why ``request`` is out of scope, or None to follow it."""
        if self.max_depth is not None and request.depth > self.max_depth:
            return FilterReason.MAX_DEPTH
        url = request.url
        if len(url) > MAX_URL_LENGTH:
            return FilterReason.URL_TOO_LONG
        if self.allowed_domains and not self._host_allowed(request.host):
            return FilterReason.OFFSITE
        if self._exclude and any(p.search(url) for p in self._exclude):
            return FilterReason.EXCLUDED
        if self._include and not any(p.search(url) for p in self._include):
            return FilterReason.NOT_INCLUDED
        return None

    def _host_allowed(self, host_key: str) -> bool:
        allowed = self._hosts_allowed.get(host_key)
        if allowed is None:
            if len(self._hosts_allowed) >= _HOST_CACHE_SIZE:
                self._hosts_allowed.clear()
            allowed = self._hosts_allowed[host_key] = self._match_host(host_key)
        return allowed

    def _match_host(self, host_key: str) -> bool:
        host = _bare_host(host_key)
        if host in self.allowed_domains:
            return True
        dot = host.find(".")
        while dot >= 0:
            host = host[dot + 1 :]
            if host in self.allowed_domains:
                return True
            dot = host.find(".")
        return False


def _bare_host(value: str) -> str:
    """``"Example.com:8080"`` or ``"http://example.com/"`` -> ``"example.com"``."""
    value = value.strip().lower()
    if "//" in value:
        return urlsplit(value).hostname or ""
    if value.startswith("["):
        return value[1 : value.find("]")]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value
