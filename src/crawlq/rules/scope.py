"""Which discovered links a crawl follows: domains, include/exclude patterns, depth, traps.

Scope is decided before dedup, on every link a spider yields and every redirect target. A link
out of scope is counted by reason (`FilterReason`) but not recorded one by one: it never
entered the crawl. URLs that did enter the crawl and are then skipped (robots.txt) are
recorded by the engine instead.

`Scope.admit` first rewrites the URL with the crawl's URL rules (`crawlq.urls.UrlRules`:
session identifiers and tracking parameters removed), then checks it. Besides domains,
patterns and depth it refuses the shapes of crawler traps, URLs a site can mint without end:

* ``url_too_long``: longer than `MAX_URL_LENGTH` (2,083) characters;
* ``repeated_segments``: a path that repeats one sequence of segments ``max_path_repeats``
  + 1 times in a row (``/a/b/a/b/a/b/``: relative links on a page that a server answers
  under any path, such as a soft 404 or a misconfigured rewrite);
* ``too_many_query_params``: more than ``max_query_params`` query parameters (calendars,
  faceted search: each link adds a parameter).

The per-host page budget (``max_pages_per_host``) needs a count over the whole cluster and is
kept by the frontier (`crawlq.frontier.queue.WorkQueue.push`).

Which domains a crawl follows is decided once, by `crawl_domains` (its docstring is the rule
for every command and both engines); `Scope` itself allows every host when given none. The
URL length limit is `MAX_URL_LENGTH`; `url_too_long` is its check, and `check_url_length`
refuses a seed that fails it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import StrEnum

from crawlq.errors import InvalidURL
from crawlq.request import CrawlRequest
from crawlq.request.crawl_request import MAX_URL_LENGTH
from crawlq.settings import Settings
from crawlq.urls import UrlRules, host_name

__all__ = [
    "FilterReason",
    "Scope",
    "check_url_length",
    "crawl_domains",
    "repeats_segments",
    "url_too_long",
]

_HOST_CACHE_SIZE = 4096  # hosts whose scope answer is remembered; cleared when full


def url_too_long(url: str) -> bool:
    """True when ``url`` is longer than `MAX_URL_LENGTH` characters (never followed)."""
    return len(url) > MAX_URL_LENGTH


def check_url_length(url: str) -> None:
    """Refuse a URL given by a user (a seed) that `url_too_long` says no link could be.

    Raises:
        InvalidURL: ``url`` is longer than `MAX_URL_LENGTH`; the message shows its first
            100 characters.
    """
    if url_too_long(url):
        raise InvalidURL(url[:100] + "…", f"longer than {MAX_URL_LENGTH} characters")


def crawl_domains(
    configured: Iterable[str], spider: Iterable[str] = (), seed_hosts: Iterable[str] = ()
) -> tuple[str, ...]:
    """The domains a crawl follows links to: the first of these three that is not empty.

    1. ``configured``: the ``allowed_domains`` setting (``--allow-domain``, or a job's stored
       settings);
    2. ``spider``: the spider class's ``allowed_domains``;
    3. ``seed_hosts``: the hosts of the crawl's seeds and sitemaps, in order, each once.

    Every command and engine asks this function: ``crawlq crawl`` (either engine) and
    ``crawlq seed`` store its answer as the job's ``allowed_domains``, so that every worker
    that joins finds rule 1; ``crawlq worker`` and ``crawlq reparse`` ask it again with the
    spider they run. An empty answer means nobody named a domain, and the callers decide:
    a native worker refuses to start (it would follow links to every host on the web,
    `Scope`'s meaning of none); the Celery engine, whose seeds may arrive one ``scrape``
    task at a time with no job settings, takes each page's own host as the seed host of the
    links found on it (`crawlq.celery.runtime.jobs.JobRuntime`).

    Returns:
        The domains (subdomains included, ports ignored, as `Scope` matches them), or ``()``.
    """
    return tuple(configured) or tuple(spider) or tuple(dict.fromkeys(seed_hosts))


class FilterReason(StrEnum):
    """Why a URL was not followed or not fetched.

    A page's link is counted for the first rule that refuses it: `Scope.check`'s reasons in
    its order, then the page's own ``extension`` and ``nofollow`` (not members here: the
    link extraction's, `crawlq.spider.Response.skipped_links`); ``robots_txt`` and
    ``private_address`` are decided when a URL is about to be fetched
    (`crawlq.engine.parse.ParsedPage.take`).
    """

    OFFSITE = "offsite"
    MAX_DEPTH = "max_depth"
    EXCLUDED = "excluded"
    NOT_INCLUDED = "not_included"
    URL_TOO_LONG = "url_too_long"
    ROBOTS_TXT = "robots_txt"
    PRIVATE_ADDRESS = "private_address"
    """The host is on a refused address (`crawlq.web.addresses`); nothing was sent to it."""
    REPEATED_SEGMENTS = "repeated_segments"
    """The path repeats a sequence of segments more than ``max_path_repeats`` times in a row."""
    TOO_MANY_QUERY_PARAMS = "too_many_query_params"
    """The query has more than ``max_query_params`` parameters."""


class Scope:
    """A compiled scope rule.

    Args:
        allowed_domains: Host names whose pages (and subdomains' pages) are followed; ports are
            ignored. Empty: every host is allowed.
        include: Regexes; when non-empty a URL must match one (``re.search``).
        exclude: Regexes; a URL matching any is not followed.
        max_depth: Deepest link depth followed (seeds are 0), or None for no limit.
        max_path_repeats: Most times in a row one sequence of path segments may appear
            (`repeats_segments`), or None for no limit.
        max_query_params: Most query parameters a URL may have, or None for no limit.
        url_rules: The rewriting rules `admit` applies first (default: none; `from_settings`
            gives the setting ``strip_url_params``).
    """

    def __init__(
        self,
        allowed_domains: Iterable[str] = (),
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        max_depth: int | None = None,
        *,
        max_path_repeats: int | None = None,
        max_query_params: int | None = None,
        url_rules: UrlRules | None = None,
    ) -> None:
        self.allowed_domains = frozenset(host_name(d) for d in allowed_domains if d)
        self._include = [re.compile(p) for p in include]
        self._exclude = [re.compile(p) for p in exclude]
        self.max_depth = max_depth
        self.max_path_repeats = max_path_repeats
        self.max_query_params = max_query_params
        self.url_rules = UrlRules(()) if url_rules is None else url_rules
        self._hosts_allowed: dict[str, bool] = {}  # host key -> allowed; few hosts per crawl

    @classmethod
    def from_settings(cls, settings: Settings, allowed_domains: Iterable[str]) -> Scope:
        """The scope of ``settings`` (include, exclude, depth, traps, URL rules).

        Args:
            settings: The crawl's (or job's) settings.
            allowed_domains: The domains in force (`crawl_domains`).
        """
        s = settings
        return cls(
            allowed_domains,
            s.include,
            s.exclude,
            s.max_depth,
            max_path_repeats=s.max_path_repeats,
            max_query_params=s.max_query_params,
            url_rules=UrlRules(s.strip_url_params),
        )

    def admit(self, request: CrawlRequest) -> tuple[CrawlRequest, FilterReason | None]:
        """Rewrite ``request`` with the URL rules, then check it (`check`).

        Returns:
            The request to follow (``request`` itself when the rules leave its URL as it is)
            and None, or the rewritten request and why it is out of scope.
        """
        request = request.rewritten(self.url_rules)
        return request, self.check(request)

    def check(self, request: CrawlRequest) -> FilterReason | None:
        """Return why ``request`` is out of scope, or None to follow it."""
        if self.max_depth is not None and request.depth > self.max_depth:
            return FilterReason.MAX_DEPTH
        url = request.url
        if url_too_long(url):
            return FilterReason.URL_TOO_LONG
        if self.allowed_domains and not self._host_allowed(request.host):
            return FilterReason.OFFSITE
        if self._exclude and any(p.search(url) for p in self._exclude):
            return FilterReason.EXCLUDED
        if self._include and not any(p.search(url) for p in self._include):
            return FilterReason.NOT_INCLUDED
        if self.max_query_params is not None and "?" in url:
            query = url[url.index("?") + 1 :]
            if query.count("&") >= self.max_query_params and _params(query) > (
                self.max_query_params
            ):
                return FilterReason.TOO_MANY_QUERY_PARAMS
        if self.max_path_repeats is not None and repeats_segments(url, self.max_path_repeats):
            return FilterReason.REPEATED_SEGMENTS
        return None

    def _host_allowed(self, host_key: str) -> bool:
        allowed = self._hosts_allowed.get(host_key)
        if allowed is None:
            if len(self._hosts_allowed) >= _HOST_CACHE_SIZE:
                self._hosts_allowed.clear()
            allowed = self._hosts_allowed[host_key] = self._match_host(host_key)
        return allowed

    def _match_host(self, host_key: str) -> bool:
        host = host_name(host_key)
        if host in self.allowed_domains:
            return True
        dot = host.find(".")
        while dot >= 0:
            host = host[dot + 1 :]
            if host in self.allowed_domains:
                return True
            dot = host.find(".")
        return False


def _params(query: str) -> int:
    """Query parameters: non-empty ``&``-separated pairs (``a=1&&b`` has two)."""
    return sum(1 for pair in query.split("&") if pair)


def repeats_segments(url: str, max_repeats: int) -> bool:
    """Tell whether the path of ``url`` repeats one sequence of segments too often in a row.

    ``/a/b/a/b/a/b/c`` repeats ``[a, b]`` three times in a row; ``/x/x/x`` repeats ``[x]``
    three times. Empty segments are ignored (``/a//a`` is ``[a, a]``); the query is not part
    of the path. Most paths have no segment twice and cost one set of their segments.

    Args:
        url: An absolute URL.
        max_repeats: Most repetitions allowed in a row (>= 1).

    Returns:
        True when some sequence appears more than ``max_repeats`` times in a row.
    """
    start = url.find("/", url.find("//") + 2)
    if start < 0:
        return False
    end = url.find("?", start)
    end = len(url) if end < 0 else end
    times = max_repeats + 1
    if url.count("/", start, end) < times:
        return False  # fewer segments than repeats: most paths stop here
    segments = [s for s in url[start:end].split("/") if s]
    count = len(segments)
    if count < times or len(set(segments)) == count:
        return False
    for size in range(1, count // times + 1):
        run = 0  # segments so far that equal the one `size` before them
        for i in range(size, count):
            if segments[i] == segments[i - size]:
                run += 1
                if run >= size * (times - 1):
                    return True
            else:
                run = 0
    return False
