"""The user-facing spider API: `Spider`, `Response` and the helpers the engine calls.

A Scrapy user will recognise it::

    class DocsSpider(Spider):
        name = "docs"
        start_urls = ["https://example.org/docs/"]

        def parse(self, response):
            yield {"title": response.css("title::text").get(), "url": response.url}
            yield from response.follow_all()

A callback receives a `Response` and returns (or yields) items (``dict``) and requests
(`CrawlRequest`, usually made with `Response.follow`). Requests cross processes as JSON, so a
callback is stored by its method *name* and ``meta``/``cb_kwargs`` must be JSON-serialisable.

The engine uses `load_spider` to find the class, `Spider.start_requests` to seed,
`Spider.wants_status` to decide whether a response reaches a callback, and `run_callback`
to call it. The spider follows whatever it yields; domains, depth and robots.txt are
applied later by the engine (`crawlq.scope`), not here.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import logging
import re
import sys
from collections import Counter
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from selectolax.lexbor import LexborHTMLParser

from crawlq.cookies import NO_COOKIES, check_cookies
from crawlq.errors import ConfigError, InvalidURL, SpiderError
from crawlq.links import (
    LinkRules,
    PageLinks,
    PageScan,
    document_base,
    extract_title,
    parse_html,
    scan_page,
)
from crawlq.request import CrawlRequest, FetchResult
from crawlq.sitemap import SitemapRules, sitemap_request
from crawlq.urls import encode_query, resolve

if TYPE_CHECKING:  # parsel (and lxml) load on first use of css/xpath: most crawls never do
    from parsel import Selector, SelectorList

__all__ = [
    "CallbackRun",
    "Response",
    "Spider",
    "SpiderError",
    "is_callback",
    "load_spider",
    "run_callback",
    "sitemap_rules_of",
    "start_callback",
]

logger = logging.getLogger(__name__)

_XML_TYPES = frozenset({"text/xml", "application/xml"})
_DEFAULT_RULES = LinkRules()
_NON_WORD = re.compile(r"\W")
_HAS_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class Response:
    """A fetched page as a spider callback sees it.

    Parsers are built lazily and at most once: `tree` (selectolax, used by `links`, `title`
    and `urljoin`) and the parsel selector behind `css` and `xpath`, which is only built if
    the spider calls them.

    Args:
        request: The request that was fetched.
        result: What the fetcher returned for it.
        tree: An already parsed tree of ``markup`` to share (the engine parses once for the
            title, the links and the spider); parsed on first use when None.
        markup: The text `tree` and `selector` parse: ``result.text``, or its start when the
            engine cut a page with more link tags than ``max_links_per_page``
            (`crawlq.links.screen_html`). None means ``result.text``.
        scan: The engine's `crawlq.links.scan_page` of ``tree`` to share; made on first use
            when None.
        rules: Which links `links` and `follow_all` offer (the crawl's ``skip_extensions``
            and ``obey_robots``); None: the defaults (`crawlq.links.LinkRules`).
    """

    __slots__ = (
        "_base",
        "_links",
        "_markup",
        "_result",
        "_rules",
        "_scan",
        "_selector",
        "_skipped",
        "_tree",
        "request",
    )

    def __init__(
        self,
        request: CrawlRequest,
        result: FetchResult,
        *,
        tree: LexborHTMLParser | None = None,
        markup: str | None = None,
        scan: PageScan | None = None,
        rules: LinkRules | None = None,
    ) -> None:
        self.request = request
        self._result = result
        self._markup = result.text if markup is None else markup
        self._tree = tree
        self._scan = scan
        self._rules = _DEFAULT_RULES if rules is None else rules
        self._selector: Selector | None = None
        self._base: str | None = None
        self._links: PageLinks | None = None
        self._skipped: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.url}>"

    @property
    def url(self) -> str:
        """The final URL, after redirects."""
        return self._result.final_url

    @property
    def status(self) -> int:
        """HTTP status code of the final response."""
        return self._result.status

    @property
    def headers(self) -> Mapping[str, str]:
        """Response headers, names lower-cased, repeated headers joined with ", "."""
        return self._result.headers

    @property
    def body(self) -> bytes:
        """The body bytes, content-encoding removed."""
        return self._result.body

    @property
    def text(self) -> str:
        """The body decoded with `encoding` ("" for non-text bodies)."""
        return self._result.text

    @property
    def encoding(self) -> str | None:
        """The character encoding of `text`, or None for non-text bodies."""
        return self._result.encoding

    @property
    def meta(self) -> Mapping[str, Any]:
        """The request's ``meta``: data a callback passed along with `follow`."""
        return self.request.meta

    @property
    def depth(self) -> int:
        """Links followed from a seed to reach this page (seeds are 0)."""
        return self.request.depth

    @property
    def tree(self) -> LexborHTMLParser:
        """The selectolax (lexbor) tree of `text`, parsed on first use and then shared.

        Of a page cut at ``max_links_per_page`` link tags, the tree of the part before the cut.
        """
        if self._tree is None:
            self._tree = parse_html(self._markup)
        return self._tree

    @property
    def selector(self) -> Selector:
        """The parsel `Selector` behind `css` and `xpath`, built on first use.

        XML media types are parsed as XML; everything else (XHTML included) as HTML. Of a
        page cut at ``max_links_per_page`` link tags, the part before the cut, as `tree`.
        """
        if self._selector is None:
            kind = "xml" if self._result.content_type in _XML_TYPES else "html"
            from parsel import Selector

            self._selector = Selector(text=self._markup, type=kind, base_url=self.url)
        return self._selector

    def css(self, query: str) -> SelectorList[Selector]:
        """Select with a CSS query (parsel, with ``::text`` and ``::attr(name)``)."""
        return self.selector.css(query)

    def xpath(self, query: str, **variables: Any) -> SelectorList[Selector]:
        """Select with an XPath 1.0 query (parsel); ``variables`` bind ``$name`` references."""
        return self.selector.xpath(query, **variables)

    @property
    def title(self) -> str | None:
        """The document ``<title>``, whitespace collapsed; None when missing or blank."""
        return extract_title(self.tree)

    @property
    def canonical_url(self) -> str | None:
        """The page's ``<link rel="canonical">``, resolved and normalised; None if none."""
        return self._page_scan().canonical_url

    @property
    def meta_robots(self) -> frozenset[str]:
        """Directives of the page's ``<meta name="robots">``, lower case (``nofollow``...)."""
        return self._page_scan().robots

    @property
    def skipped_links(self) -> Counter[str]:
        """Links of the page that `links` and `follow_all` left out so far, by reason.

        ``extension``: distinct links whose path extension is in ``skip_extensions``
        (counted once `links` has run); ``nofollow``: links `follow_all` left out for
        ``rel="nofollow"`` or the page's ``<meta name="robots">``. The engine adds them to
        the crawl's "links not followed". The counter is live: do not change it.
        """
        return self._skipped

    def links(self, *, include_nofollow: bool = True) -> list[str]:
        """Return the page's crawlable links (`crawlq.links.extract_links`, base = `url`).

        Args:
            include_nofollow: False leaves out links marked ``rel="nofollow"`` (a URL also
                linked without it stays), and every link of a page whose
                ``<meta name="robots">`` says ``nofollow`` or ``none``.

        Returns:
            Absolute, normalised http(s) URLs without fragments or skipped extensions
            (``skip_extensions``), each once, in document order. A new list on each call.
        """
        links = self._page_links()
        if include_nofollow:
            return list(links.urls)
        if self._page_scan().robots_nofollow:
            return []
        return [url for url in links.urls if url not in links.nofollow]

    def _page_scan(self) -> PageScan:
        if self._scan is None:
            self._scan = scan_page(self.tree, self.url)
        return self._scan

    def _page_links(self) -> PageLinks:
        if self._links is None:
            scan = self._page_scan()
            self._links = scan.links(self._rules.skip_extensions, encoding=self.encoding)
            if self._links.skipped_extension:
                self._skipped["extension"] = self._links.skipped_extension
        return self._links

    def _followed_links(self) -> list[str]:
        """`links` as `follow_all` takes them: without nofollow ones under ``obey_robots``."""
        links = self._page_links()
        if not self._rules.honour_nofollow or not (links.nofollow or self.meta_robots):
            return list(links.urls)
        followed = self.links(include_nofollow=False)
        if len(followed) < len(links.urls):
            self._skipped["nofollow"] = len(links.urls) - len(followed)
        return followed

    def urljoin(self, href: str) -> str:
        """Resolve ``href`` against the document base (``<base href>``, else `url`).

        As a browser resolves a link on this page (`crawlq.urls.resolve`): backslashes,
        ``///host`` and the like as the WHATWG URL Standard says, and a non-ASCII query
        percent-encoded in the page's `encoding` (`crawlq.urls.encode_query`).

        Args:
            href: An absolute or relative URL; surrounding whitespace is ignored.

        Returns:
            The absolute URL (not validated; `follow` does that); ``href`` itself when it
            cannot be resolved.
        """
        href = encode_query(href.strip(), self.encoding)
        if _HAS_AUTHORITY.match(href):
            return href  # absolute
        if self._base is None:
            scan = self._scan
            self._base = document_base(self.tree, self.url) if scan is None else scan.base
        try:
            return resolve(href, self._base)
        except InvalidURL:
            return href

    def follow(
        self,
        href: str | Selector,
        callback: Callable[..., Any] | str | None = None,
        *,
        priority: int | None = None,
        meta: Mapping[str, Any] | None = None,
        cb_kwargs: Mapping[str, Any] | None = None,
        method: str = "GET",
        body: bytes = b"",
        cookies: Mapping[str, str] | None = None,
    ) -> CrawlRequest | None:
        """Return a request for a link on this page, one level deeper, or None.

        None means the link cannot be crawled (``mailto:``, ``javascript:``, another scheme,
        no host): yielding None from a callback is allowed and ignored, so
        ``yield response.follow(href)`` needs no check.

        The new request has ``depth = self.depth + 1`` and this page's request URL as its
        ``referrer``. Unless ``priority`` is given it gets
        ``priority = -(self.depth + 1)``: since a higher priority runs sooner, pages near the
        seeds (indexes, tables of contents) are fetched before the leaves they lead to, and
        the frontier stays small.

        Args:
            href: A relative or absolute URL, or a parsel `Selector` of an element with an
                ``href`` (``<a>``, ``<area>``, ``<link>``) or of an attribute value
                (``a::attr(href)``).
            callback: The spider method that parses the response, as a bound method
                (``self.parse_item``) or its name; None means ``parse``. Stored as the name.
            priority: Higher runs sooner; None for the depth-based default above.
            meta: JSON-serialisable data, readable as ``response.meta`` in the callback.
            cb_kwargs: JSON-serialisable keyword arguments for the callback.
            method: HTTP method.
            body: Request body bytes.
            cookies: Cookies to send with this request, name to value, besides the worker's
                jar (README "Cookies"); not inherited from this response's request: pass
                ``response.request.cookies`` to keep a session on whichever worker fetches.

        Returns:
            The request (yield or return it from the callback to crawl it), or None when the
            link is not an http(s) URL with a host.

        Raises:
            ValueError: ``href`` is a selector without an ``href``, or ``cookies`` breaks a
                rule of `crawlq.cookies.check_cookies` (the message starts with
                ``cookies:``).
            TypeError: ``callback`` is neither a spider method nor a string.
        """
        if not isinstance(href, str):
            href = _href_of(href)
        name = _callback_name(callback)
        depth = self.request.depth + 1
        try:
            return CrawlRequest(
                url=self.urljoin(href),
                method=method,
                body=body,
                priority=-depth if priority is None else priority,
                depth=depth,
                callback=name,
                cb_kwargs=dict(cb_kwargs) if cb_kwargs else {},
                meta=dict(meta) if meta else {},
                cookies=cookies or NO_COOKIES,
                referrer=self.request.url,
            )
        except InvalidURL as exc:
            logger.debug("not following %r from %s: %s", href, self.url, exc.reason)
            return None

    def follow_all(
        self,
        hrefs: Iterable[str | Selector] | None = None,
        callback: Callable[..., Any] | str | None = None,
        *,
        priority: int | None = None,
        meta: Mapping[str, Any] | None = None,
        cb_kwargs: Mapping[str, Any] | None = None,
        method: str = "GET",
        body: bytes = b"",
        cookies: Mapping[str, str] | None = None,
    ) -> list[CrawlRequest]:
        """Return a `follow` request for each of ``hrefs``, skipping invalid ones silently.

        Args:
            hrefs: URLs or selectors (a parsel `SelectorList` works); None means every link
                of the page (`links`) except, when the crawl obeys robots rules
                (``obey_robots``, the default), links marked ``rel="nofollow"`` and every
                link of a page whose ``<meta name="robots">`` says ``nofollow`` or
                ``none``. To follow those anyway, pass ``response.links()``.
            callback: As in `follow`.
            priority: As in `follow`.
            meta: As in `follow`; each request gets its own copy.
            cb_kwargs: As in `follow`.
            method: As in `follow`.
            body: As in `follow`.
            cookies: As in `follow`.

        Returns:
            The requests, in the order of ``hrefs``.

        Raises:
            TypeError: ``callback`` is neither a spider method nor a string.
            ValueError: ``cookies`` breaks a rule of `crawlq.cookies.check_cookies`.
        """
        name = _callback_name(callback)  # raise on a bad callback even with no links
        cookies = check_cookies(cookies) if cookies else None  # and on bad cookies
        plain = not (body or meta or cb_kwargs or cookies)
        if hrefs is None and method == "GET" and plain:
            # The page's own links are absolute, normalised and valid already (`links`):
            # the same requests as `follow` makes, without resolving each link again.
            depth = self.request.depth + 1
            rank = -depth if priority is None else priority
            here = self.request.url
            return [
                CrawlRequest(url, priority=rank, depth=depth, callback=name, referrer=here)
                for url in self._followed_links()
            ]
        requests: list[CrawlRequest] = []
        for href in self._followed_links() if hrefs is None else hrefs:
            try:
                request = self.follow(
                    href,
                    name,
                    priority=priority,
                    meta=meta,
                    cb_kwargs=cb_kwargs,
                    method=method,
                    body=body,
                    cookies=cookies,
                )
            except ValueError:  # a selector without an href
                continue
            if request is not None:
                requests.append(request)
        return requests


class Spider:
    """Base class of crawlq spiders; the base itself follows every link and yields no items.

    Subclass it, set `start_urls`, and write callbacks that take a `Response` and return or
    yield ``dict`` items and `CrawlRequest` objects (see `run_callback` for every accepted
    shape). Keyword arguments to the constructor become instance attributes (the CLI sets
    ``start_urls`` this way), so class-level lists are never mutated.

    Attributes:
        name: Spider name, recorded with every page it parses.
        start_urls: Seed URLs for `start_requests`.
        allowed_domains: Hosts (and their subdomains) whose links the engine follows;
            empty means the seeds' hosts.
        custom_settings: Settings overriding the settings file, below environment and CLI
            (`crawlq.settings.Settings.build`).
        handle_httpstatus_list: Non-2xx statuses that still reach the callbacks.
        sitemap_urls: Sitemaps to read at the start (`crawlq.sitemap`; robots.txt
            ``Sitemap:`` lines are read with the ``follow_sitemaps`` setting).
        sitemap_rules: ``(regex, callback)`` pairs, as Scrapy's ``SitemapSpider``: a URL a
            sitemap lists goes to the callback of the first regex found in it (``re.search``),
            and is skipped when none is; a callback is a public method's name. Empty: every
            URL, to ``parse``.
        sitemap_follow: Regexes of the child sitemaps (of an index or robots.txt) to read;
            empty: all.
    """

    name: str = "default"
    start_urls: list[str] = []
    allowed_domains: list[str] = []
    custom_settings: dict[str, Any] = {}
    handle_httpstatus_list: list[int] = []
    sitemap_urls: list[str] = []
    sitemap_rules: list[tuple[str, Any]] = []
    sitemap_follow: list[str] = []

    def __init__(self, **kwargs: Any) -> None:
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    def start_requests(self) -> Iterable[CrawlRequest]:
        """Yield the seed requests: one per `start_urls` entry, depth 0, priority 0.

        Then a sitemap request (`crawlq.sitemap.sitemap_request`) per `sitemap_urls` entry.
        Override to seed with other methods, callbacks or priorities.

        Raises:
            InvalidURL: A start URL is not an http(s) URL with a host.
        """
        for url in self.start_urls:
            yield CrawlRequest(url=url, depth=0, priority=0)
        for url in self.sitemap_urls:
            yield sitemap_request(url)

    def parse(self, response: Response) -> Any:
        """Default callback: follow every link of the page (`Response.follow_all`).

        Under ``obey_robots`` (the default) that leaves out ``rel="nofollow"`` links and the
        links of a page whose ``<meta name="robots">`` says ``nofollow`` or ``none``;
        override ``parse`` with ``yield from response.follow_all(response.links())`` to
        follow them anyway.

        Args:
            response: The fetched page.

        Returns:
            Items and requests in any shape `run_callback` accepts.
        """
        yield from response.follow_all()

    def wants_status(self, status: int) -> bool:
        """Return whether a response with ``status`` is passed to a callback.

        Args:
            status: HTTP status of the final response.

        Returns:
            True for 2xx and for statuses in `handle_httpstatus_list`.
        """
        return 200 <= status < 300 or status in self.handle_httpstatus_list


def load_spider(path: str | None) -> type[Spider]:
    """Find a spider class by path.

    Args:
        path: ``"package.module:ClassName"`` (imported from ``sys.path``) or
            ``"path/to/file.py:ClassName"`` (loaded from the file; it is not added to
            ``sys.path``). ``ClassName`` may be dotted for a nested class. None means
            the base `Spider`.

    Returns:
        The spider class.

    Raises:
        ConfigError: Named ``spider``, with a message naming ``path``: no colon, an empty
            part, a module that cannot be found or imported, a missing file, a missing
            attribute, or an attribute that is not a `Spider` subclass.
    """
    if path is None:
        return Spider
    target, colon, qualname = path.rpartition(":")
    if not colon:
        raise ConfigError(
            "spider",
            f"{path!r} has no ':'; expected 'package.module:ClassName' "
            "or 'path/to/file.py:ClassName'",
        )
    if not target or not qualname:
        raise ConfigError("spider", f"{path!r}: both the module and the class name are needed")
    if target.endswith(".py") or "/" in target or "\\" in target:
        module = _load_file(target, path)
    else:
        module = _import_module(target, path)
    obj: Any = module
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                "spider", f"{path!r}: {target!r} has no attribute {qualname!r}"
            ) from None
    if not (isinstance(obj, type) and issubclass(obj, Spider)):
        raise ConfigError(
            "spider", f"{path!r}: {qualname!r} is not a subclass of crawlq.spider.Spider"
        )
    return obj


async def run_callback(
    spider: Spider, response: Response
) -> tuple[list[dict[str, Any]], list[CrawlRequest]]:
    """Call the request's callback on ``response`` and collect what it produced.

    The callback is ``spider.<response.request.callback or "parse">``, called as
    ``callback(response, **response.request.cb_kwargs)``. It may return None, an item
    (``dict``), a `CrawlRequest`, an iterable or generator of those, an awaitable of any of
    these (``async def``), or an async generator. None inside an iterable is skipped.
    The engine checks `Spider.wants_status` before calling this, and runs the synchronous
    part (`start_callback`: a plain callback, or a generator's iteration) on its page
    thread, off the event loop, and only what is asynchronous (`CallbackRun.finish`) on the
    loop.

    Args:
        spider: The spider instance.
        response: The page to parse.

    Returns:
        ``(items, requests)`` in the order produced.

    Raises:
        SpiderError: The callback is missing, raised an exception (chained as the
            ``__cause__``), or produced a value that is neither a dict nor a
            `CrawlRequest`. Nothing of a failed callback's output is returned.
    """
    return await start_callback(spider, response).finish()


class CallbackRun:
    """A callback call: what it produced synchronously, and what is left to await.

    Attributes:
        items: Items produced so far.
        requests: Requests produced so far.
        pending: An awaitable or async iterable still to run on the event loop, or None
            when the callback is done.
    """

    __slots__ = ("_name", "_url", "items", "pending", "requests")

    def __init__(self, url: str, name: str) -> None:
        self._url = url
        self._name = name
        self.items: list[dict[str, Any]] = []
        self.requests: list[CrawlRequest] = []
        self.pending: object = None

    def collect(self, value: object) -> None:
        """Add one produced value (None is skipped).

        Raises:
            TypeError: ``value`` is neither a dict nor a `CrawlRequest`.
        """
        if isinstance(value, dict):
            self.items.append(value)
        elif isinstance(value, CrawlRequest):
            self.requests.append(value)
        elif value is not None:
            raise TypeError(
                f"produced a {type(value).__name__}; expected a dict item or a CrawlRequest"
            )

    def collect_output(self, output: object) -> None:
        """Collect a synchronous output; keep an awaitable or async iterable as `pending`."""
        if inspect.isawaitable(output) or isinstance(output, AsyncIterable):
            self.pending = output
        else:
            self._collect_sync(output)

    def _collect_sync(self, output: object) -> None:
        if output is None or isinstance(output, dict | CrawlRequest):
            self.collect(output)
        elif isinstance(output, Iterable) and not isinstance(output, str | bytes):
            for value in output:
                self.collect(value)
        else:
            self.collect(output)  # raises TypeError

    async def finish(self) -> tuple[list[dict[str, Any]], list[CrawlRequest]]:
        """Run what is `pending` on the event loop; return ``(items, requests)``.

        Raises:
            SpiderError: As `run_callback`.
        """
        pending, self.pending = self.pending, None
        try:
            if inspect.isawaitable(pending):
                pending = await pending
                if not isinstance(pending, AsyncIterable):
                    self._collect_sync(pending)
                    pending = None
            if pending is not None:
                async for value in cast(AsyncIterable[object], pending):
                    self.collect(value)
        except Exception as exc:
            raise SpiderError.raised(self._url, self._name, exc) from exc
        return self.items, self.requests


def start_callback(spider: Spider, response: Response) -> CallbackRun:
    """Call the callback (as `run_callback`) and run its synchronous part.

    A plain function's result, and every value of a generator, are collected here; an
    awaitable or async generator is left in `CallbackRun.pending` for
    `CallbackRun.finish`, on the event loop.

    Raises:
        SpiderError: As `run_callback`.
    """
    name = response.request.callback or "parse"
    method = _callback_method(spider, name, response.url)
    run = CallbackRun(response.url, name)
    try:
        run.collect_output(method(response, **response.request.cb_kwargs))
    except Exception as exc:
        raise SpiderError.raised(response.url, name, exc) from exc
    return run


_NOT_CALLBACKS = frozenset(n for n in vars(Spider) if n != "parse")
"""The base class's own names other than ``parse`` (``start_requests``, ``wants_status``…)."""


def is_callback(spider: Spider, name: str) -> bool:
    """Whether a request may name ``name`` as its callback on ``spider`` (public methods)."""
    try:
        _callback_method(spider, name, "")
    except SpiderError:
        return False
    return True


def sitemap_rules_of(spider: Spider) -> SitemapRules:
    """The spider's ``sitemap_rules`` and ``sitemap_follow``, compiled and checked.

    Raises:
        ConfigError: Named ``spider``: a bad regex, or a callback that is not a public method.
    """
    return SitemapRules.compile(
        spider.sitemap_rules, spider.sitemap_follow, lambda name: is_callback(spider, name)
    )


def _callback_method(spider: Spider, name: str, url: str) -> Callable[..., Any]:
    """The spider method a request names as its callback.

    A request's callback comes from shared state (an inbox entry, a task message), so only a
    public method of the spider may be named: not a private or special name (``_helper``,
    ``__init__``) nor one of the base class's own methods (``start_requests``).

    Raises:
        SpiderError: No such callback.
    """
    method: object = None
    if not name.startswith("_") and name not in _NOT_CALLBACKS:
        method = getattr(spider, name, None)
    if not callable(method):
        raise SpiderError(
            url,
            name,
            f"spider {type(spider).__name__} has no callback {name!r}",
            kind="MissingCallback",
        )
    return method


def _href_of(selector: Selector) -> str:
    """The URL a parsel selector stands for: an attribute value, or an element's href."""
    from parsel import Selector

    if not isinstance(selector, Selector):
        raise TypeError(f"href must be a str or a parsel Selector, got {type(selector).__name__}")
    root = selector.root
    if isinstance(root, str):
        return root
    href = selector.attrib.get("href")
    if href is None:
        raise ValueError(f"selector has no href: {selector.get()[:100]!r}")
    return str(href)


def _callback_name(callback: Callable[..., Any] | str | None) -> str | None:
    """The name under which a callback is stored in a request (requests are JSON)."""
    if callback is None or isinstance(callback, str):
        return callback
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, Spider):
        return str(callback.__name__)
    raise TypeError(
        f"callback must be a spider method or its name, got {callback!r}; "
        "requests are JSON, so a callback is stored by name"
    )


def _load_file(file: str, path: str) -> Any:
    """Execute a spider file as a fresh module; ``path`` is the user's input, for messages."""
    source = Path(file).expanduser().resolve()
    if not source.is_file():
        raise ConfigError("spider", f"{path!r}: file {file!r} not found")
    digest = hashlib.sha1(str(source).encode(), usedforsecurity=False).hexdigest()[:8]
    module_name = f"crawlq_spider_{_NON_WORD.sub('_', source.stem)}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, source)
    if spec is None or spec.loader is None:
        raise ConfigError("spider", f"{path!r}: {file!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up here
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise ConfigError(
            "spider", f"{path!r}: loading {file!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def _import_module(target: str, path: str) -> Any:
    """Import ``target`` by name; ``path`` is the user's input, for messages."""
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (target == exc.name or target.startswith(exc.name + ".")):
            raise ConfigError("spider", f"{path!r}: module {target!r} not found") from exc
        raise ConfigError(
            "spider", f"{path!r}: importing {target!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise ConfigError(
            "spider", f"{path!r}: importing {target!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
