"""`Response`: a fetched page as a spider callback sees it, and the requests it follows.

Its parsers are lazy: the selectolax tree (`crawlq.links.parse_html`) is shared with the engine,
which parses a page once for the title, the links and the spider; the parsel selector behind
`Response.css` and `Response.xpath` is built only when a spider calls them (parsel and lxml
load on that first call). `Response.follow` and `Response.follow_all` make the
`CrawlRequest` of a link one level deeper, with ``priority = -depth`` unless the spider
chooses one.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from selectolax.lexbor import LexborHTMLParser

from crawlq.errors import InvalidURL
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
from crawlq.spider.spider import callback_name
from crawlq.urls import encode_query, resolve
from crawlq.web.cookies import NO_COOKIES, check_cookies
from crawlq.web.headers import NO_HEADERS, check_headers

if TYPE_CHECKING:  # parsel (and lxml) load on first use of css/xpath: most crawls never do
    from parsel import Selector, SelectorList

__all__ = ["Response"]

logger = logging.getLogger(__name__)

_XML_TYPES = frozenset({"text/xml", "application/xml"})
_DEFAULT_RULES = LinkRules()
_NO_LINKS = PageLinks(urls=(), nofollow=frozenset())
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
        "_document_base",
        "_links",
        "_markup",
        "_nofollow_links",
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
        self._document_base: str | None = None
        self._links: PageLinks | None = None
        self._skipped: Counter[str] = Counter()
        self._nofollow_links: tuple[str, ...] = ()

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

    def json(self) -> Any:
        """The body parsed as JSON (RFC 8259), as Scrapy's ``TextResponse.json()``.

        Parsed from `text` when the body was decoded, else from the body bytes (UTF-8, -16 or
        -32, detected as `json.loads` does), whatever the Content-Type says.

        Raises:
            ValueError: The body is not JSON (`json.JSONDecodeError`, with the position).
        """
        return json.loads(self._result.text or self._result.body)

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
        ``rel="nofollow"`` or the page's ``<meta name="robots">``; `skipped_link_urls`
        lists them. The engine adds them to the crawl's "links not followed", where a link
        that the crawl's scope refuses as well is counted under the scope's reason
        (``offsite``...) instead (`crawlq.engine.parse.ParsedPage.take`). The counter is
        live: do not change it.
        """
        return self._skipped

    @property
    def skipped_link_urls(self) -> dict[str, tuple[str, ...]]:
        """The links counted in `skipped_links`, by reason (``extension``, ``nofollow``).

        Normalised as `links` returns URLs, each once, in document order; a reason is
        there once `links` (``extension``) or `follow_all` (``nofollow``) has left a link
        out for it. A new dict on each call.
        """
        urls: dict[str, tuple[str, ...]] = {}
        if self._links is not None and self._links.skipped_extension:
            urls["extension"] = self._links.skipped_extension
        if self._nofollow_links:
            urls["nofollow"] = self._nofollow_links
        return urls

    def links(self, *, include_nofollow: bool = True) -> list[str]:
        """Return the page's crawlable links (`crawlq.links.extract_links`, base = `url`).

        Args:
            include_nofollow: False leaves out links marked ``rel="nofollow"`` (a URL also
                linked without it stays), and every link of a page whose
                ``<meta name="robots">`` says ``nofollow`` or ``none``.

        Returns:
            Absolute, normalised http(s) URLs without fragments or skipped extensions
            (``skip_extensions``), each once, in document order. A new list on each call.
            Empty for a response that is not HTML (`crawlq.web.decode.sniff`: JSON, XML, plain
            text, binary), as Scrapy's link extractors only read HTML responses; a callback
            that wants links from such a body reads them itself (`selector`, `text`).
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
        if self._links is None and not self._result.is_html:
            self._links = _NO_LINKS  # JSON, XML, text, binary: not a document to crawl
        if self._links is None:
            scan = self._page_scan()
            self._links = scan.links(self._rules.skip_extensions, encoding=self.encoding)
            if self._links.skipped_extension:
                self._skipped["extension"] = len(self._links.skipped_extension)
        return self._links

    def _followed_links(self) -> list[str]:
        """`links` as `follow_all` takes them: without nofollow ones under ``obey_robots``."""
        links = self._page_links()
        if not self._rules.honour_nofollow or not (links.nofollow or self.meta_robots):
            return list(links.urls)
        followed = self.links(include_nofollow=False)
        if len(followed) < len(links.urls):
            self._skipped["nofollow"] = len(links.urls) - len(followed)
            kept = set(followed)
            self._nofollow_links = tuple(url for url in links.urls if url not in kept)
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
        if self._document_base is None:
            scan = self._scan
            self._document_base = document_base(self.tree, self.url) if scan is None else scan.base
        try:
            return resolve(href, self._document_base)
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
        headers: Mapping[str, str] | None = None,
        errback: Callable[..., Any] | str | None = None,
        dont_filter: bool = False,
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
            headers: Request headers, name to value, over the job's ``default_headers``
                (`crawlq.web.headers.check_headers`: no ``Host``, ``Cookie``, ``Authorization``…);
                not inherited from this response's request.
            errback: The spider method called with a `crawlq.spider.Failure` if the request
                ends as a dead letter or gets a non-2xx status the spider does not handle, as
                a bound method or its name (the same rule as ``callback``).
            dont_filter: Fetch the link even if its URL was seen already (once per yield).

        Returns:
            The request (yield or return it from the callback to crawl it), or None when the
            link is not an http(s) URL with a host.

        Raises:
            ValueError: ``href`` is a selector without an ``href``, ``cookies`` breaks a
                rule of `crawlq.web.cookies.check_cookies` (the message starts with
                ``cookies:``), or ``headers`` one of `crawlq.web.headers.check_headers`
                (``headers:``).
            TypeError: ``callback`` or ``errback`` is neither a spider method nor a string.
        """
        if not isinstance(href, str):
            href = _href_of(href)
        name = callback_name(callback)
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
                headers=headers or NO_HEADERS,
                errback=callback_name(errback),
                dont_filter=dont_filter,
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
        headers: Mapping[str, str] | None = None,
        errback: Callable[..., Any] | str | None = None,
        dont_filter: bool = False,
        css: str | None = None,
        xpath: str | None = None,
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
            headers: As in `follow`.
            errback: As in `follow`.
            dont_filter: As in `follow`.
            css: In place of ``hrefs``, the elements this CSS selector picks (Scrapy's
                ``follow_all(css=...)``): each one's ``href``, or the attribute value a
                selector such as ``a::attr(href)`` gives.
            xpath: The same with an XPath.

        Returns:
            The requests, in the order of ``hrefs``.

        Raises:
            ValueError: More than one of ``hrefs``, ``css`` and ``xpath`` given.
            TypeError: ``callback`` or ``errback`` is neither a spider method nor a string.
            ValueError: ``cookies`` breaks a rule of `crawlq.web.cookies.check_cookies`, or
                ``headers`` one of `crawlq.web.headers.check_headers`.
        """
        if sum(x is not None for x in (hrefs, css, xpath)) > 1:
            raise ValueError("follow_all takes one of hrefs, css and xpath")
        if css is not None:
            hrefs = self.css(css)
        elif xpath is not None:
            hrefs = self.xpath(xpath)
        name = callback_name(callback)  # raise on a bad callback even with no links
        errback_name = callback_name(errback)
        cookies = check_cookies(cookies) if cookies else None  # and on bad cookies
        headers = check_headers(headers) if headers else None
        no_extras = not (body or meta or cb_kwargs or cookies or headers or errback_name)
        no_extras = no_extras and not dont_filter
        if hrefs is None and method == "GET" and no_extras:
            # The page's own links are absolute, normalised and valid already (`links`):
            # the same requests as `follow` makes, without resolving each link again.
            depth = self.request.depth + 1
            link_priority = -depth if priority is None else priority
            referrer = self.request.url
            return [
                CrawlRequest(
                    url, priority=link_priority, depth=depth, callback=name, referrer=referrer
                )
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
                    headers=headers,
                    errback=errback_name,
                    dont_filter=dont_filter,
                )
            except ValueError:  # a selector without an href
                continue
            if request is not None:
                requests.append(request)
        return requests


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
