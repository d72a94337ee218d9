"""The parse step of a fetched page: screen, parse, scan, and the spider's callback.

`parse_response` is shared by the crawl (`crawlq.engine.step.process`) and ``crawlq
reparse`` (`crawlq.ops.reparse`, which gives a response stored earlier), so both decide
alike which responses reach a callback, screen hostile HTML, bound the time
(``parse_timeout_s``, on the worker's page thread: `crawlq.engine.pagework`) and keep the
same items and links. Its result is a `ParsedPage`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from crawlq.engine.deps import Deps
from crawlq.engine.item_flow import ItemFlow, PipelineFailed
from crawlq.engine.outcome import Outcome, status_error
from crawlq.engine.pagework import PageTimeout, PageWork
from crawlq.errors import InvalidURL
from crawlq.items import Unserialisable, jsonable
from crawlq.links import (
    DEPTH_CHECK_MIN_TAGS,
    LinkRules,
    Refresh,
    extract_title,
    parse_html,
    scan_page,
    screen_html,
)
from crawlq.middleware import Middlewares, SpiderOutputRun
from crawlq.records import (
    UNSERIALISABLE_ITEM,
    ItemRecord,
    spider_error,
    spider_error_type,
)
from crawlq.request import MAX_DEPTH, CrawlRequest, FetchResult
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.spider import (
    CallbackRun,
    Failure,
    Response,
    Spider,
    SpiderError,
    start_callback,
    start_errback,
)

__all__ = ["INLINE_MAX_TAGS", "ParsedPage", "dead_errback", "parse_response"]

logger = logging.getLogger(__name__)


INLINE_MAX_TAGS = DEPTH_CHECK_MIN_TAGS
"""A page with at most this many ``<`` is parsed on the event loop when no user code runs on it
(no callback, or the base `Spider.parse`): however it nests, lexbor takes at most ~15 ms on it
(the time grows with the square of the depth, and the depth is below the count of ``<``), less
than the page thread's hand-off costs in all. Any other page, and every user callback, runs on
the worker's page thread (`crawlq.engine.pagework`)."""


async def parse_response(
    req: CrawlRequest,
    result: FetchResult,
    spider: Spider,
    scope: Scope,
    settings: Settings,
    pages: PageWork,
    link_rules: LinkRules,
    middlewares: Middlewares | None = None,
    items: ItemFlow | None = None,
) -> ParsedPage:
    """Parse a response and run the spider's callback on it: the parse step of `process`.

    Shared by the crawl and ``crawlq reparse`` (which gives a response stored earlier), so
    both decide alike which responses reach a callback, screen hostile HTML, bound the time
    (``parse_timeout_s``, on ``pages``' thread) and keep the same items and links.

    Args:
        req: The request the response answers (its callback, ``cb_kwargs`` and ``meta``).
        result: The response.
        spider: The spider whose callback runs.
        scope: Which of the requests the callback yields are kept (the others are counted
            in ``skipped``).
        settings: Limits: ``max_html_depth``, ``max_links_per_page``, ``parse_timeout_s``.
        pages: The page thread.
        link_rules: Which links the page offers the spider (`crawlq.links.LinkRules`).
        middlewares: Whose spider middlewares take a callback's output (not an errback's)
            before scope does (`crawlq.middleware.Middlewares.spider_output`); None: none.
        items: What the callback's items go through (validation, pipelines, dedup:
            `crawlq.engine.item_flow`); None: validation only, from the spider's
            ``item_type``.

    Returns:
        The page's title, canonical URL and error (None, ``http_404``, ``spider_error:
        KeyError: …``, ``parse_timeout: …``), the callback's items and in-scope requests, and
        the requests skipped by reason. When the page is a meta refresh (``refresh_url`` set),
        the callback has not run: the caller follows the refresh instead.
    """
    error: str | None = None
    mode = _mode(req, result, spider)
    if not 200 <= result.status < 300:
        error = status_error(result)
    elif result.binary is not None:  # labelled HTML, but not: no title, no links from it
        error = f"binary_body: {result.binary}"
    page = ParsedPage(error)
    if mode or result.is_html:
        page.tags = result.text.count("<")
        work = functools.partial(
            _parse_page, req, result, spider, scope, settings, page, mode, link_rules, middlewares
        )
        try:
            inline = not (middlewares and middlewares.spider)
            if inline and page.tags <= INLINE_MAX_TAGS and _builtin_callback(spider, req, mode):
                page = work()
            else:
                page = await pages.run(work, settings.parse_timeout_s)
        except PageTimeout:
            logger.warning(
                "%s: parsing and the callback ran past parse_timeout_s (%gs); storing the page"
                " without them",
                req.url,
                settings.parse_timeout_s,
            )
            page = ParsedPage(
                f"parse_timeout: parsing or the callback ran past {settings.parse_timeout_s:g}s"
            )
        if page.refresh_url is not None:  # a meta refresh: the caller follows it
            return page
        if page.callback is not None:  # an async callback: the rest runs on the loop
            try:
                found_items, found_requests = await _finish(page, middlewares)
            except SpiderError as exc:
                page.spider_failed(exc)
            else:
                page.take(found_items, found_requests, req, spider, scope, settings)
        await _flow_items(page, req, spider, settings, items, pages)
        page.response = None  # the tree and body go now, not when the page is stored
    if spider_error_type(page.error) is not None:
        # one traceback: the callback's own exception, not again as the cause of the
        # SpiderError that wraps it
        failed = page.exc_info
        shown = failed.__cause__ if isinstance(failed, SpiderError) and failed.__cause__ else failed
        logger.error("spider error on %s: %s", req.url, page.error, exc_info=shown)
    return page


async def _flow_items(
    page: ParsedPage,
    req: CrawlRequest,
    spider: Spider,
    settings: Settings,
    items: ItemFlow | None,
    pages: PageWork,
) -> None:
    """The callback's items through ``items`` (validation only when None), if it had any."""
    if page.found or page.invalid:
        flow = items if items is not None else ItemFlow(spider, settings, None, pipelines=False)
        await page.flow_items(req, spider, flow, pages)


@dataclass(slots=True)
class ParsedPage:
    """What parsing a page and its callback produced (the page thread fills it)."""

    error: str | None
    title: str | None = None
    canonical_url: str | None = None
    refresh_url: str | None = None  # a meta refresh to follow instead of the callback
    items: list[ItemRecord] = field(default_factory=list)
    links: list[CrawlRequest] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    link_skips: Counter[str] | None = None  # the Response's links left out, by reason
    callback: CallbackRun | SpiderOutputRun | None = None
    output_of: tuple[Response, CallbackRun] | None = None  # spider middlewares after callback
    tags: int = 0  # "<" in the text
    link_tags: int = 0
    exc_info: BaseException | None = None
    found: list[Any] = field(default_factory=list)  # the callback's items, as yielded
    invalid: list[str] = field(default_factory=list)  # bad items the callback raised
    response: Response | None = None  # what the pipelines are given
    dropped: Counter[str] = field(default_factory=Counter)  # items dropped, "pipeline: why"

    async def flow_items(
        self, req: CrawlRequest, spider: Spider, flow: ItemFlow, pages: PageWork
    ) -> None:
        """Take ``found`` through ``flow`` (`crawlq.engine.item_flow`) into ``items``.

        A pipeline that fails, or runs past ``parse_timeout_s``, fails the page as its
        callback would: nothing of its items is stored. So does an item with a value JSON
        cannot hold (`crawlq.items.adapt`): a spider error of the stored page.
        """
        found, self.found = self.found, []
        if flow.plain and not self.invalid and all(type(i) is dict for i in found):
            try:  # nothing to validate, run or dedup
                self._keep_items(req, spider, [jsonable(i) for i in found])
            except Unserialisable as exc:
                self._unserialisable(exc)
            return
        try:
            result = await flow.run(
                found,
                self.response,
                req.record_fingerprint,
                pages,
                url=req.url,
                invalid_found=self.invalid,
            )
        except PipelineFailed as exc:
            error = exc.error
            self.error = spider_error(type(error).__name__, f"pipeline {exc.pipeline}: {error}")
            self.exc_info = error
            return
        except PageTimeout:
            budget = flow.budget_s
            logger.warning("%s: item pipelines ran past parse_timeout_s (%gs)", req.url, budget)
            self.error = f"parse_timeout: the item pipelines ran past {budget:g}s"
            return
        except Unserialisable as exc:
            self._unserialisable(exc)
            return
        self.dropped = result.dropped
        self._keep_items(req, spider, result.items)

    def _keep_items(self, req: CrawlRequest, spider: Spider, items: list[dict[str, Any]]) -> None:
        """The page's item records, of items made JSON (`crawlq.items.jsonable`)."""
        now = time.time()
        self.items = [
            ItemRecord(req.record_fingerprint, i, req.url, spider.name, item, now)
            for i, item in enumerate(items)
        ]

    def _unserialisable(self, exc: Unserialisable) -> None:
        """No items, and a spider error of the page: an item holds what JSON cannot."""
        detail = f"item is not JSON-serialisable: {exc}"
        self.error, self.items = spider_error(UNSERIALISABLE_ITEM, detail), []

    def spider_failed(self, exc: SpiderError) -> None:
        """Record a failed callback: user code, so the page is stored and the crawl goes on."""
        self.error = spider_error(exc.kind, f"callback {exc.callback!r}: {exc.detail}")
        self.exc_info = exc
        self.callback = None

    def take(
        self,
        found_items: list[Any],
        found_requests: list[CrawlRequest],
        req: CrawlRequest,
        spider: Spider,
        scope: Scope,
        settings: Settings,
    ) -> None:
        """Keep the callback's in-scope requests, at most ``max_links_per_page``, and its items.

        The items wait in ``found`` for `flow_items`, which makes them the page's records.
        """
        self.found = found_items
        if self.link_skips:
            self.skipped.update(self.link_skips)
            if self.response is not None:
                self._scope_first(self.response.skipped_link_urls, req, scope)
        cap = settings.max_links_per_page
        for place, yielded in enumerate(found_requests[:cap]):
            child, reason = scope.admit(_yielded(yielded, req, place))  # traps refused
            if reason is None:
                self.links.append(child)
            else:
                self.skipped[reason] += 1
        found = max(len(found_requests), self.link_tags)
        if found > cap and self.error is None:
            self.error = f"links_capped: {cap} of {found}"
            logger.warning("%s: %d links, only the first %d taken", req.url, found, cap)

    def _scope_first(
        self, left_out: dict[str, tuple[str, ...]], req: CrawlRequest, scope: Scope
    ) -> None:
        """Count the left-out links the scope refuses under its reason (``offsite``...).

        The page's extraction left them out for ``extension`` or ``nofollow``. What "links
        not followed" counts a link as is the first of these rules that refuses it:

        1. the crawl's scope (`crawlq.rules.scope.Scope.check`, in its own order: ``max_depth``,
           ``url_too_long``, ``offsite``, ``excluded``, ``not_included``, the traps), as a
           Scrapy link extractor applies its domains and patterns before
           ``deny_extensions``;
        2. ``skip_extensions`` (``extension``), for links the scope would have followed;
        3. ``rel="nofollow"`` and ``<meta name="robots" content="nofollow">``
           (``nofollow``), for the links `crawlq.spider.Response.follow_all` leaves out.

        robots.txt is decided when a request is about to be sent, so a link left out here
        is never counted as ``robots_txt``. The page's extraction (`crawlq.links`) does not
        know the scope and leaves links out first; this counts them again, as links of
        depth ``req.depth + 1``, as the page's own requests are checked.

        Args:
            left_out: The links left out, by reason (`Response.skipped_link_urls`).
            req: The page's request.
            scope: The crawl's scope.
        """
        depth = min(req.depth + 1, MAX_DEPTH)
        for why, urls in left_out.items():
            for url in urls:
                try:
                    reason = scope.admit(CrawlRequest(url, depth=depth, referrer=req.url))[1]
                except (InvalidURL, ValueError):
                    continue  # not a request at all: left out for ``why``, as counted
                if reason is not None:
                    self.skipped[why] -= 1
                    self.skipped[reason] += 1
            if why in self.skipped and self.skipped[why] <= 0:
                del self.skipped[why]


def _yielded(yielded: CrawlRequest, req: CrawlRequest, place: int) -> CrawlRequest:
    """A request a callback (or errback) of ``req`` yielded, as the engine queues it.

    Whatever the spider built it with (``response.follow``, ``CrawlRequest(...)``,
    ``FormRequest.from_response``): its ``referrer`` is ``req``'s URL, and its ``depth`` is
    ``req.depth + 1`` (as Scrapy's DepthMiddleware sets ``meta["depth"]``), so ``max_depth``
    bounds every request. One built with another depth and the default priority 0 gets the
    priority ``follow`` gives, ``-depth``; any other priority is the spider's. A
    ``dont_filter`` request gets the ``visit`` key of its yield (``req``'s fingerprint and
    ``place``): one fingerprint per yield, the same if the page is parsed again.
    """
    changes: dict[str, Any] = {}
    if yielded.referrer != req.url:  # the page that yielded it, whatever it claimed
        changes["referrer"] = req.url
    depth = min(req.depth + 1, MAX_DEPTH)
    if yielded.depth != depth:
        changes["depth"] = depth
        if yielded.priority == 0:
            changes["priority"] = -depth
    if yielded.dont_filter:
        changes["visit"] = f"{req.fingerprint.hex()}:{place}"
    return dataclasses.replace(yielded, **changes) if changes else yielded


async def _finish(
    page: ParsedPage, middlewares: Middlewares | None
) -> tuple[list[Any], list[CrawlRequest]]:
    """Finish an async callback (then the spider middlewares), or async spider middlewares.

    Raises:
        SpiderError: The callback or a spider middleware failed.
    """
    assert page.callback is not None
    found = await page.callback.finish()
    if page.output_of is None or middlewares is None:
        return found
    response, run = page.output_of
    rest = middlewares.spider_output(response, run)
    return (run.items, run.requests) if rest is None else await rest.finish()


def _mode(req: CrawlRequest, result: FetchResult, spider: Spider) -> str:
    """What a response goes to: ``"callback"``, ``"errback"`` or nothing (``""``).

    The callback gets a 2xx or a status the spider handles (not a 3xx); the errback, when
    the request names one, any other status outside 3xx.
    """
    status = result.status
    if 200 <= status < 300 or (not 300 <= status < 400 and spider.wants_status(status)):
        return "callback"
    if req.errback and not 300 <= status < 400:
        return "errback"
    return ""


def _builtin_callback(spider: Spider, req: CrawlRequest, mode: str) -> bool:
    """True when the page goes to no callback, or to the base `Spider.parse` (follow_all)."""
    if mode != "callback":
        return not mode
    return req.callback in (None, "parse") and getattr(type(spider), "parse", None) is Spider.parse


def _parse_page(
    req: CrawlRequest,
    result: FetchResult,
    spider: Spider,
    scope: Scope,
    settings: Settings,
    page: ParsedPage,
    mode: str,
    rules: LinkRules,
    middlewares: Middlewares | None = None,
) -> ParsedPage:
    """Screen, parse, scan, and the callback's synchronous part: the page thread's work."""
    tree = None
    markup = None
    scan = None
    if result.is_html:
        screened = screen_html(
            result.text, settings.max_html_depth, settings.max_links_per_page, tags=page.tags
        )
        if screened.too_deep is not None:
            page.error = f"html_too_deep: more than {settings.max_html_depth} nested elements"
            return page
        markup, page.link_tags = screened.markup, screened.link_tags
        tree = parse_html(markup)
        page.title = extract_title(tree)
        scan = scan_page(tree, result.final_url)
        page.canonical_url = scan.canonical_url
        if scan.refresh is not None and _follows_refresh(scan.refresh, result, settings):
            page.refresh_url = scan.refresh.url
            return page
    if not mode:
        return page
    response = Response(req, result, tree=tree, markup=markup, scan=scan, rules=rules)
    page.link_skips = response.skipped_links
    page.response = response
    try:
        if mode == "errback":
            failure = Failure(req, f"http_{result.status}", response=response)
            run = start_errback(spider, failure)
        else:
            run = start_callback(spider, response)
        rest = None
        wrapped = mode == "callback" and middlewares is not None and bool(middlewares.spider)
        if run.pending is not None:
            page.callback = run
            if wrapped:
                page.output_of = (response, run)
        elif wrapped and middlewares is not None:
            rest = middlewares.spider_output(response, run)
    except SpiderError as exc:
        page.spider_failed(exc)
        return page
    page.invalid = run.invalid
    if rest is not None:
        page.callback = rest
    elif run.pending is None:
        page.take(run.items, run.requests, req, spider, scope, settings)
    return page


def _follows_refresh(refresh: Refresh, result: FetchResult, settings: Settings) -> bool:
    """True when a page's meta refresh is followed as a redirect (module docstring).

    Not when ``meta_refresh`` is off, the delay is over ``meta_refresh_max_delay_s``, the
    refresh reloads the page itself, or the response is a 3xx (its ``Location`` decides).
    """
    return (
        settings.meta_refresh
        and refresh.url is not None
        and refresh.delay_s <= settings.meta_refresh_max_delay_s
        and not 300 <= result.status < 400
    )


async def dead_errback(outcome: Outcome, deps: Deps) -> None:
    """Call the errback of a dead-lettered request; add what it yielded to ``outcome``.

    The errback gets a `crawlq.spider.Failure` with the dead letter's reason and detail and
    no response; it runs as a callback does (its synchronous part on the page thread, within
    ``parse_timeout_s``). Its items are stored with the dead letter, its requests pushed
    through scope as a callback's. An errback that fails (or is not a public method of the
    spider) is logged as a spider error; the dead letter is stored as it is.
    """
    req = outcome.lease.request
    detail = outcome.dead.detail if outcome.dead is not None else ""
    failure = Failure(req, str(outcome.reason), detail)  # a plain str, not a FilterReason
    page = ParsedPage(None)
    spider, scope, settings = deps.spider, deps.scope, deps.settings

    def work() -> CallbackRun | None:
        run = start_errback(spider, failure)
        page.invalid = run.invalid
        if run.pending is not None:
            return run
        page.take(run.items, run.requests, req, spider, scope, settings)
        return None

    try:
        run = await deps.pages.run(work, settings.parse_timeout_s)
        if run is not None:
            found_items, found_requests = await run.finish()
            page.take(found_items, found_requests, req, spider, scope, settings)
        await _flow_items(page, req, spider, settings, deps.items, deps.pages)
        if page.error is not None:
            logger.error("%s: the items of its errback: %s", req.url, page.error)
            page.items = []
    except SpiderError as exc:
        logger.error("spider error in the errback of %s: %s", req.url, exc, exc_info=exc)
        return
    except PageTimeout:
        logger.warning("%s: its errback ran past parse_timeout_s", req.url)
        return
    outcome.items = page.items
    outcome.links = page.links
    outcome.skipped.update(page.skipped)
    outcome.dropped.update(page.dropped)
