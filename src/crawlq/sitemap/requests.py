"""What a sitemap leads to: the requests for the URLs it lists and the sitemaps it names.

A sitemap is a `CrawlRequest` whose callback is `SITEMAP_CALLBACK` (`sitemap_request`
makes one). That name is not a Python identifier, so no spider method can be called by it,
and what it does to a request from shared state (an inbox entry) is bounded: the body is
read as a sitemap under the protocol's limits (`crawlq.sitemap.reader`), and every URL it
lists passes the crawl's scope, robots.txt and private-address guard like any link.

Depth, priority and meta (`read_sitemap`):

* A sitemap is a list of seeds: the URLs it lists, and an index's sitemaps, get the
  sitemap request's own depth, so ``--max-depth 0`` fetches exactly what the sitemaps list.
  An index may list indexes (the protocol forbids it, sites do it anyway) at most
  `MAX_NESTING` deep (``meta["sitemap_nesting"]`` counts it); deeper ones are skipped
  (``sitemap_nesting``), so a site cannot grow an endless chain of indexes under a depth limit.
* ``<priority>`` (0.0 to 1.0, default 0.5) maps onto crawlq's integer priority by
  `listed_priority`: ``sitemap's priority + round(10 * p) - 5``, one step per 0.1, so 0.5 keeps
  the sitemap's priority, 1.0 is 5 above it and 0.0 five below. Child sitemaps keep the
  index's priority.
* ``<lastmod>`` is kept, as written, in ``meta["sitemap_lastmod"]`` of the request.
* URLs must be absolute ("fully qualified"): a relative one is skipped (``invalid_url``).
* The spider chooses (`SitemapRules`): ``sitemap_rules`` (regex, callback) pairs pick the
  callback of each listed URL by the first regex found in it (a URL no rule matches is skipped:
  ``sitemap_rules``); ``sitemap_follow`` regexes choose which child sitemaps (of an index or of
  robots.txt) are read (``sitemap_follow``). Both default to everything, with ``parse``.

The spider's choices are checked once, when the spider is loaded (`SitemapRules.compile`: a
bad regex or callback is a `ConfigError` named ``spider``); the engine then asks
`SitemapRules.callback_for` of each listed URL and `SitemapRules.follows` of each child
sitemap. Empty rules mean every URL, with ``parse``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crawlq.errors import ConfigError, InvalidURL
from crawlq.request import CrawlRequest
from crawlq.rules.scope import Scope
from crawlq.sitemap.reader import parse_sitemap
from crawlq.sitemap.sitemap import MAX_BYTES, MAX_URLS, Sitemap, SitemapEntry, SitemapKind

__all__ = [
    "LASTMOD_KEY",
    "MAX_NESTING",
    "NESTING_KEY",
    "SITEMAP_CALLBACK",
    "Listed",
    "SitemapRules",
    "is_sitemap",
    "listed_priority",
    "read_sitemap",
    "robots_sitemaps",
    "sitemap_request",
]

SITEMAP_CALLBACK = "crawlq:sitemap"
"""The callback name that marks a request as a sitemap (not an identifier: no spider method
can have it)."""

MAX_NESTING = 3
"""Most levels of sitemap indexes under the first sitemap (the protocol allows one)."""

NESTING_KEY = "sitemap_nesting"
"""``meta`` key of a child sitemap: how many indexes lead to it."""

LASTMOD_KEY = "sitemap_lastmod"
"""``meta`` key of a listed URL: its ``<lastmod>`` as written."""


def sitemap_request(
    url: str,
    *,
    priority: int = 0,
    depth: int = 0,
    meta: Mapping[str, Any] | None = None,
    referrer: str | None = None,
) -> CrawlRequest:
    """A request that reads ``url`` as a sitemap (XML, index, text, gzipped or not).

    Args:
        url: Absolute http(s) URL of the sitemap.
        priority: Higher runs sooner; the URLs it lists are ranked around it
            (`listed_priority`).
        depth: Its depth, which the URLs it lists inherit (module docstring).
        meta: Carried to the request (``sitemap_nesting`` counts index levels).
        referrer: The sitemap index that lists it, if any.

    Raises:
        InvalidURL: ``url`` is not an absolute http(s) URL.
    """
    return CrawlRequest(
        url,
        priority=priority,
        depth=depth,
        callback=SITEMAP_CALLBACK,
        meta=dict(meta or {}),
        referrer=referrer,
    )


def is_sitemap(request: CrawlRequest) -> bool:
    """Whether ``request`` is to be read as a sitemap."""
    return request.callback == SITEMAP_CALLBACK


def listed_priority(base: int, sitemap_priority: float | None) -> int:
    """The crawlq priority of a URL a sitemap lists with ``<priority>`` ``sitemap_priority``.

    ``base + round(10 * p) - 5`` (halves round up), with ``p`` clamped to 0.0..1.0 and 0.5
    (the protocol's default) when absent: 0.0 -> base - 5, 0.5 -> base, 1.0 -> base + 5.

    Args:
        base: The sitemap request's priority.
        sitemap_priority: The entry's ``<priority>``, or None.
    """
    p = 0.5 if sitemap_priority is None else min(1.0, max(0.0, sitemap_priority))
    return base + int(p * 10 + 0.5) - 5


# -- the spider's sitemap rules ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SitemapRules:
    """A spider's sitemap choices, compiled (`compile`; semantics in the module docstring).

    Attributes:
        rules: ``(pattern, callback)`` pairs; empty: every URL, callback ``parse``.
        follow: Patterns of child sitemaps to read; empty: every one.
    """

    rules: tuple[tuple[re.Pattern[str], str | None], ...] = ()
    follow: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def compile(
        cls,
        rules: Iterable[tuple[str | re.Pattern[str], Any]] = (),
        follow: Iterable[str | re.Pattern[str]] = (),
        is_callback: Callable[[str], bool] | None = None,
    ) -> SitemapRules:
        """Compile a spider's ``sitemap_rules`` and ``sitemap_follow``.

        Args:
            rules: ``(regex, callback)`` pairs; a callback is a method name, a function
                (its ``__name__`` is taken) or None for ``parse``.
            follow: Regexes.
            is_callback: Says whether a name is a callback the spider may be given; None
                accepts every name.

        Raises:
            ConfigError: Named ``spider``: a regex does not compile, a rule is not a pair,
                or a callback is not one of the spider's public methods.
        """
        compiled: list[tuple[re.Pattern[str], str | None]] = []
        for rule in rules:
            if not isinstance(rule, tuple | list) or len(rule) != 2:
                raise ConfigError("spider", f"sitemap_rules: {rule!r:.80} is not (regex, callback)")
            pattern, callback = rule
            name = callback if callback is None or isinstance(callback, str) else None
            if callback is not None and name is None:
                name = getattr(callback, "__name__", None)
                if not isinstance(name, str):
                    raise ConfigError("spider", f"sitemap_rules: bad callback {callback!r:.80}")
            if name is not None and is_callback is not None and not is_callback(name):
                raise ConfigError(
                    "spider", f"sitemap_rules: {name!r} is not a public method of the spider"
                )
            compiled.append((_regex(pattern, "sitemap_rules"), name))
        patterns = tuple(_regex(p, "sitemap_follow") for p in follow)
        return cls(tuple(compiled), patterns)

    def callback_for(self, url: str) -> tuple[bool, str | None]:
        """Whether to follow a URL a sitemap lists, and with which callback (None: parse)."""
        if not self.rules:
            return True, None
        for pattern, callback in self.rules:
            if pattern.search(url):
                return True, callback
        return False, None

    def follows(self, url: str) -> bool:
        """Whether to read a child sitemap (of an index or robots.txt)."""
        return not self.follow or any(p.search(url) for p in self.follow)


def _regex(pattern: str | re.Pattern[str], what: str) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise ConfigError("spider", f"{what}: bad regex {pattern!r:.80}: {exc}") from None


# -- what a sitemap lists ------------------------------------------------------------------


@dataclass(slots=True)
class Listed:
    """What reading one sitemap gives the crawl (`read_sitemap`).

    Attributes:
        requests: In-scope requests to push: pages, or child sitemaps of an index.
        skipped: Listed URLs not followed, by reason (scope reasons, ``invalid_url``,
            ``sitemap_rules``, ``sitemap_follow``, ``sitemap_nesting``,
            ``sitemap_too_many_urls``).
        sitemap: The parse itself.
    """

    requests: list[CrawlRequest]
    skipped: Counter[str]
    sitemap: Sitemap


def read_sitemap(
    request: CrawlRequest,
    body: bytes,
    scope: Scope,
    rules: SitemapRules,
    *,
    max_urls: int = MAX_URLS,
    max_bytes: int = MAX_BYTES,
) -> Listed:
    """Parse a fetched sitemap and make the requests it leads to (module docstring).

    Args:
        request: The sitemap request (its depth, priority and nesting are inherited).
        body: The response body (content-encoding undone; gzip or not).
        scope: Every listed URL must pass it.
        rules: The spider's `SitemapRules`.
        max_urls: Most entries taken (`MAX_URLS`).
        max_bytes: Most bytes parsed, uncompressed (`MAX_BYTES`); a longer body is cut.

    Returns:
        The requests, what was skipped and why, and the parse (its ``error`` is the page's).
    """
    sitemap = parse_sitemap(body, max_urls=max_urls, max_bytes=max_bytes)
    skipped: Counter[str] = Counter()
    if sitemap.invalid:
        skipped["invalid_url"] += sitemap.invalid
    if sitemap.found > len(sitemap.entries):
        skipped["sitemap_too_many_urls"] += sitemap.found - len(sitemap.entries)
    requests: list[CrawlRequest] = []
    nesting = _nesting(request)
    for entry in sitemap.entries:
        made = _listed_request(request, entry, sitemap.kind, nesting, rules)
        if isinstance(made, str):
            skipped[made] += 1
            continue
        made, reason = scope.admit(made)  # the URL rules (session ids), then the scope
        if reason is None:
            requests.append(made)
        else:
            skipped[reason] += 1
    return Listed(requests, skipped, sitemap)


def robots_sitemaps(
    urls: Sequence[str], trigger: CrawlRequest, scope: Scope, rules: SitemapRules
) -> tuple[list[CrawlRequest], Counter[str]]:
    """Sitemap requests for the ``Sitemap:`` lines of a robots.txt.

    They get the depth and priority of ``trigger``, the request whose robots.txt check
    loaded the file, and pass ``sitemap_follow`` and the scope like any child sitemap.

    Args:
        urls: The absolute URLs of the lines (at most `MAX_URLS` are taken).
        trigger: The request that loaded robots.txt.
        scope: The crawl's scope.
        rules: The spider's `SitemapRules`.

    Returns:
        The requests to push, and the URLs skipped by reason.
    """
    requests: list[CrawlRequest] = []
    skipped: Counter[str] = Counter()
    for url in urls[:MAX_URLS]:
        if not rules.follows(url):
            skipped["sitemap_follow"] += 1
            continue
        try:
            made = sitemap_request(url, priority=trigger.priority, depth=trigger.depth)
        except (InvalidURL, ValueError):
            skipped["invalid_url"] += 1
            continue
        made, reason = scope.admit(made)
        if reason is None:
            requests.append(made)
        else:
            skipped[reason] += 1
    return requests, skipped


def _nesting(request: CrawlRequest) -> int:
    value = request.meta.get(NESTING_KEY, 0)
    return value if type(value) is int and value >= 0 else MAX_NESTING


def _listed_request(
    parent: CrawlRequest,
    entry: SitemapEntry,
    kind: SitemapKind | None,
    nesting: int,
    rules: SitemapRules,
) -> CrawlRequest | str:
    """The request for one entry, or why it is skipped."""
    meta: dict[str, Any] = {LASTMOD_KEY: entry.lastmod} if entry.lastmod else {}
    try:
        if kind is SitemapKind.INDEX:
            if not rules.follows(entry.loc):
                return "sitemap_follow"
            if nesting >= MAX_NESTING:
                return "sitemap_nesting"
            meta[NESTING_KEY] = nesting + 1
            return sitemap_request(
                entry.loc,
                priority=parent.priority,
                depth=parent.depth,
                meta=meta,
                referrer=parent.url,
            )
        follow, callback = rules.callback_for(entry.loc)
        if not follow:
            return "sitemap_rules"
        return CrawlRequest(
            entry.loc,
            priority=listed_priority(parent.priority, entry.priority),
            depth=parent.depth,
            callback=callback,
            meta=meta,
            referrer=parent.url,
        )
    except (InvalidURL, ValueError):
        return "invalid_url"
