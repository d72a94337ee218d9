"""One URL through a crawl's step, alone: ``crawlq fetch``, ``crawlq parse`` and ``crawlq shell``.

`fetch_one` takes a URL through `crawlq.engine.step.process`, the very function both engines
run for every lease: robots.txt, the private-address guard (the URL's host is its seed host,
exempt as a crawl's seeds are; every other host is guarded), the fetcher's user agent,
content decoding and size caps, the parse step and the spider's callback. A redirect (or a
meta refresh) is what a crawl makes of it, a hop request, and `fetch_one` takes that hop
through `process` again, so each hop is checked like a crawl's, up to ``max_redirects``.

Nothing is stored and nothing is queued: no store is opened, and the host notes that
`process` writes (a 429's pause, a robots.txt Crawl-delay) go to a throwaway embedded
frontier in a temporary directory, removed on return. Each URL is tried once:
``max_retries`` is 0, so a transient failure is reported as the dead letter a crawl would
end with after its last retry.
"""

from __future__ import annotations

import dataclasses
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawlq.engine.deps import Deps
from crawlq.engine.outcome import Kind, Outcome
from crawlq.engine.plan import with_seed_hosts
from crawlq.engine.step import process
from crawlq.fetch import Fetcher
from crawlq.frontier import open_frontier
from crawlq.records import ItemRecord
from crawlq.request import CrawlRequest, FetchResult, Lease
from crawlq.robots import RobotsCache
from crawlq.rules.politeness import Politeness
from crawlq.rules.scope import FilterReason, Scope, crawl_domains
from crawlq.settings import Settings
from crawlq.spider import Spider

__all__ = ["Tried", "fetch_one"]

_RELEASES_MAX = 3
"""`process` answers RELEASE at most this often for one URL (robots.txt loaded first)."""
_LEASE_MS = 10**12


@dataclass(slots=True)
class Tried:
    """What a crawl would have made of one URL, its redirects followed.

    Attributes:
        request: The last request tried (the redirect target of the one before).
        responses: Every response received, in order: the redirects, then the last one.
        outcome: `process`'s outcome for ``request``.
        failure: Why there is no page, as a dead letter or a filtered record names it
            (``robots_txt: …``, ``private_address: …``, ``http_503: …``), or None.
    """

    request: CrawlRequest
    responses: list[FetchResult] = field(default_factory=list)
    outcome: Outcome | None = None
    failure: str | None = None

    @property
    def response(self) -> FetchResult | None:
        """The last response, or None when nothing answered."""
        return self.responses[-1] if self.responses else None

    @property
    def items(self) -> list[ItemRecord]:
        """The items the callback yielded (none after a failure)."""
        return [] if self.outcome is None else self.outcome.items

    @property
    def requests(self) -> list[CrawlRequest]:
        """The requests the callback yielded that the crawl's scope keeps."""
        if self.outcome is None or self.outcome.kind is not Kind.PAGE:
            return []
        return self.outcome.links

    @property
    def skipped(self) -> Counter[str]:
        """Requests yielded but out of the crawl's scope, by reason."""
        return Counter() if self.outcome is None else self.outcome.skipped


class _Recording(Fetcher):
    """The crawl's fetcher, keeping each response to a URL (not robots.txt) in order."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.answers: dict[str, FetchResult] = {}

    async def fetch(self, url: str, **kwargs: Any) -> FetchResult:
        result = await super().fetch(url, **kwargs)
        self.answers[url] = result
        return result


async def fetch_one(
    settings: Settings,
    url: str | CrawlRequest,
    spider: Spider | None = None,
    *,
    callback: str | None = None,
    meta: Mapping[str, Any] | None = None,
    spider_scope: bool = False,
) -> Tried:
    """Fetch ``url`` as a crawl seeded with it would, and run ``spider``'s callback on it.

    Args:
        settings: The command's settings (user agent, timeouts, caps, robots.txt, guard).
        url: The URL, or a whole `CrawlRequest` (its method, body, headers, cookies,
            callback and meta: ``crawlq shell``'s ``fetch(FormRequest.from_response(…))``);
            its host is the seed host (exempt from the private-address guard).
        spider: Whose callback runs (default: the base `Spider`).
        callback: The callback's name (default: the request's, else ``parse``).
        meta: The request's ``meta`` (default: the request's).
        spider_scope: Keep only the yielded requests (and redirects) a crawl seeded with
            ``url`` would follow (its allowed domains: settings, else spider, else the URL's
            host). False: only ``--allow-domain``'s domains, when given, limit redirects.

    Raises:
        InvalidURL: ``url`` is not a crawlable URL.
    """
    spider = spider or Spider()
    if isinstance(url, CrawlRequest):
        request = url
        if callback is not None or meta is not None:
            request = dataclasses.replace(
                request,
                callback=request.callback if callback is None else callback,
                meta=request.meta if meta is None else dict(meta),
            )
    else:
        request = CrawlRequest(url, callback=callback, meta=dict(meta or {}))
    settings = dataclasses.replace(with_seed_hosts(settings, [request]), max_retries=0)
    domains: Iterable[str] = settings.allowed_domains
    if spider_scope:
        domains = crawl_domains(settings.allowed_domains, spider.allowed_domains, [request.host])
    scope = Scope.from_settings(settings, domains)
    rules = Politeness.from_settings(settings)
    with tempfile.TemporaryDirectory(prefix="crawlq-try-") as tmp:
        frontier = await open_frontier(str(Path(tmp) / "notes.db"), politeness=rules)
        try:
            fetcher = _Recording.from_settings(settings, max_connections=4)
            assert isinstance(fetcher, _Recording)
            async with fetcher:
                robots = None
                if settings.obey_robots:
                    robots = RobotsCache.from_settings(fetcher, settings, None)
                deps = Deps(settings, fetcher, robots, spider, scope, frontier, rules)
                try:
                    return await _follow(request, deps, fetcher)
                finally:
                    if deps.items is not None:
                        await deps.items.close()
                    deps.pages.close()
        finally:
            await frontier.close()


async def _follow(request: CrawlRequest, deps: Deps, fetcher: _Recording) -> Tried:
    """`process` the request, then each redirect hop it leads to (module docstring)."""
    tried = Tried(request)
    while True:
        outcome = await _process(request, deps)
        answer = fetcher.answers.pop(request.url, None)
        if answer is not None:
            tried.responses.append(answer)
        tried.request, tried.outcome = request, outcome
        tried.failure = _failure(outcome)
        target = _hop_of(outcome, request)
        if tried.failure is not None or target is None:
            return tried
        request = target


async def _process(request: CrawlRequest, deps: Deps) -> Outcome:
    """`process` under a lease of its own, again while robots.txt was being loaded."""
    for _ in range(_RELEASES_MAX):
        lease = Lease(uuid.uuid4().hex, request, 1, "crawlq-try", _LEASE_MS)
        outcome = await process(lease, deps)
        if outcome.kind is not Kind.RELEASE:
            return outcome
    return outcome


def _hop_of(outcome: Outcome, request: CrawlRequest) -> CrawlRequest | None:
    """The redirect (or meta refresh) target queued by ``outcome``, or None."""
    if outcome.kind is not Kind.PAGE or outcome.page is None:
        return None
    chain = [*request.meta.get("redirect_urls", ()), request.url]
    for link in outcome.links:
        if list(link.meta.get("redirect_urls", ())) == chain:
            return link
    return None


def _failure(outcome: Outcome) -> str | None:
    """Why ``outcome`` has no page to show, one line, or None."""
    url = outcome.lease.request.url
    if outcome.kind is Kind.DEAD and outcome.dead is not None:
        reason, detail = outcome.dead.reason, outcome.dead.detail
        # Some details name their reason already ("robots_unreachable fetching …").
        return detail if detail.startswith(reason) else f"{reason}: {detail}"
    if outcome.kind is Kind.FILTERED:
        if outcome.reason == FilterReason.ROBOTS_TXT:
            return f"robots_txt: robots.txt forbids {url} (--ignore-robots to fetch it anyway)"
        if outcome.reason == FilterReason.PRIVATE_ADDRESS:
            return (
                f"private_address: {url} resolves to a private address and its host is not "
                "the URL given (its seed host); --allow-private allows it"
            )
        return f"{outcome.reason}: {url}"
    if outcome.kind is Kind.RELEASE and outcome.detail:  # a proxy's: which (no password), why
        return outcome.detail
    if outcome.kind is not Kind.PAGE or outcome.page is None:
        return f"{outcome.reason or outcome.kind}: {url}"
    error = outcome.page.error or ""
    if error.startswith(("redirect_not_followed", "redirect_invalid")):
        why = ", ".join(sorted(outcome.skipped)) or "out of scope"
        return f"{error} ({why})"
    return None
