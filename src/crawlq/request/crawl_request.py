"""`CrawlRequest`: one URL to crawl, with how it was found and how to handle it.

A frozen value: the URL is normalised on construction and the request's ``fingerprint``
(dedup key, 20 bytes) and politeness ``host`` are derived from it (`crawlq.urls`). Its JSON
form is in `crawlq.request.wire`, its bounds in `crawlq.request.limits`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crawlq.errors import InvalidURL
from crawlq.request.form import FORM_CONTENT_TYPE, FormData, encode_form, form_pairs, with_query
from crawlq.request.limits import MAX_DEPTH, PRIORITY_LIMIT
from crawlq.request.wire import request_fields, request_json
from crawlq.urls import UrlRules, request_fingerprint, url_keys
from crawlq.web.cookies import NO_COOKIES, check_cookies, revisit_fingerprint
from crawlq.web.headers import NO_HEADERS, check_headers

__all__ = ["CrawlRequest", "no_cookies", "no_headers"]

_HTTP_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP method is a token (RFC 9110 §9.1, §5.6.2)."""


def no_cookies() -> Mapping[str, str]:
    """The default of a ``cookies`` field: `crawlq.web.cookies.NO_COOKIES`, shared and read-only."""
    return NO_COOKIES  # no allocation per request


def no_headers() -> Mapping[str, str]:
    """The default of a ``headers`` field: `crawlq.web.headers.NO_HEADERS`, shared and read-only."""
    return NO_HEADERS


def dont_filter_fingerprint(fingerprint: bytes, visit: str) -> bytes:
    """The fingerprint of a ``dont_filter`` request: SHA-1 of its own and its ``visit`` key."""
    digest = hashlib.sha1(b"dont_filter\0", usedforsecurity=False)
    digest.update(fingerprint)
    digest.update(visit.encode("utf-8"))
    return digest.digest()


@dataclass(frozen=True, slots=True)
class CrawlRequest:
    """One URL to crawl, with how it was found and how to handle it.

    The URL is normalised on construction (`crawlq.urls.normalize`), and the 20-byte
    ``fingerprint`` and politeness ``host`` are derived from it.

    Attributes:
        url: Absolute http(s) URL, fragment dropped.
        method: HTTP method, upper-case.
        body: Request body bytes (empty for GET).
        priority: Higher runs sooner; an int, clamped to ``±PRIORITY_LIMIT`` (524,287).
        depth: Links followed from a seed to reach this URL (seeds are 0), at most
            `MAX_DEPTH`.
        callback: Name of the spider method that parses the response (None: ``parse``).
            A bound method (``callback=self.parse``, Scrapy's idiom) is accepted and
            stored as its name, as `crawlq.spider.Response.follow` does.
        cb_kwargs: Extra keyword arguments for the callback; must be JSON-serialisable.
        meta: Free-form JSON-serialisable data carried to the response (``response.meta``).
        referrer: The URL of the page that linked to (or redirected to) this one, or None
            for a seed. Set by the engine for every request a page yields
            (`crawlq.engine.step`), recorded on the URL's page or dead letter; not part of
            the fingerprint or of equality.
        cookies: Cookies sent with this request, name to value, besides the worker's jar
            (`crawlq.fetch`; these win over the jar's of the same name). Checked by
            `crawlq.web.cookies.check_cookies`; a read-only mapping. Not in ``repr`` (values are
            secrets) and, except for a ``revisit``, not in the fingerprint.
        headers: Request headers, name to value, sent with this request over the job's
            ``default_headers`` (any case; these win over those of the same name). Checked by
            `crawlq.web.headers.check_headers` (no ``Host``, ``Cookie``, ``Authorization``...); a
            read-only mapping. Not part of the fingerprint (as in Scrapy) or of equality.
        errback: Name of the spider method called with a `crawlq.spider.Failure` when this
            request ends as a dead letter, or with a non-2xx response the spider does not
            handle (`crawlq.spider.Spider.wants_status`); None: no errback. The same rule
            as ``callback``: a public method of the spider, not one of the base class.
        dont_filter: Fetch this request even when its URL was seen already (no dedup for
            it; politeness, robots.txt, the private-address guard and scope still apply). It
            then gets a fingerprint of its own (``visit``), pushed once per yield.
        visit: The key that makes a ``dont_filter`` request's fingerprint its own: random
            when the request is made, set by the engine (`crawlq.engine.parse`) to the
            yielding page's fingerprint and the yield's place, so a page parsed again (a
            re-delivered lease) yields the same fingerprints and they are not queued twice.
            Empty without ``dont_filter``.
        revisit: Set by the engine only (`crawlq.engine.step`): this request is a redirect hop
            back to a URL of its own redirect chain. Its ``fingerprint`` then covers its
            ``cookies`` too (`crawlq.web.cookies.revisit_fingerprint`), so that the hop of a cookie
            wall (``302 Set-Cookie`` to the same URL) is not deduplicated against the request
            that got the redirect.
        fingerprint: The dedup key (`crawlq.urls.request_fingerprint` of method, canonical URL
            and body; for a ``revisit``, with its cookies; for ``dont_filter``, with its
            ``visit``).
        record_fingerprint: The key of the request's record (page, dead letter or filtered)
            and of its items in the store: the fingerprint without the revisit part, so the
            record of a revisit replaces the redirect's record of the same URL. A
            ``dont_filter`` request's covers its ``visit``: a re-visit keeps a record and
            items of its own beside the first visit's (as Scrapy outputs both visits' items),
            and a re-delivered lease, with the same ``visit``, still replaces its own.

    Raises:
        InvalidURL: ``url`` is not an absolute http(s) URL.
        ValueError: ``method`` is not an HTTP token, ``priority`` is not an int, ``depth``
            is not an int in ``0..MAX_DEPTH``, ``callback`` or ``errback`` is neither a
            string nor a bound method, ``meta`` or ``cb_kwargs`` is not a mapping (a JSON
            object), ``referrer`` is neither None nor a string, ``cookies`` breaks a rule of
            `crawlq.web.cookies.check_cookies` (the message starts with ``cookies:``),
            ``headers`` one of `crawlq.web.headers.check_headers` (``headers:``), or
            ``dont_filter`` is not a boolean.
    """

    url: str
    method: str = "GET"
    body: bytes = b""
    priority: int = 0
    depth: int = 0
    callback: str | None = None
    cb_kwargs: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    cookies: Mapping[str, str] = field(default_factory=no_cookies, repr=False)
    revisit: bool = False
    referrer: str | None = field(default=None, repr=False, compare=False)
    headers: Mapping[str, str] = field(default_factory=no_headers, repr=False, compare=False)
    errback: str | None = None
    dont_filter: bool = False
    visit: str = field(default="", repr=False, compare=False)
    fingerprint: bytes = field(init=False, repr=False, compare=False)
    host: str = field(init=False, repr=False, compare=False)
    record_fingerprint: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # noqa: C901  (one check per field)
        if type(self.depth) is not int or not 0 <= self.depth <= MAX_DEPTH:
            raise ValueError(f"depth must be an int in 0..{MAX_DEPTH}, got {self.depth!r:.40}")
        if not isinstance(self.priority, int):
            raise ValueError(f"priority must be an int, got {self.priority!r:.40}")
        if not -PRIORITY_LIMIT <= self.priority <= PRIORITY_LIMIT:
            clamped = max(-PRIORITY_LIMIT, min(PRIORITY_LIMIT, self.priority))
            object.__setattr__(self, "priority", clamped)
        for name, value in (("meta", self.meta), ("cb_kwargs", self.cb_kwargs)):
            if type(value) is not dict and not isinstance(value, Mapping):
                raise ValueError(f"{name} must be a JSON object, got {value!r:.80}")
        if self.method != "GET" and (
            not isinstance(self.method, str) or not _HTTP_TOKEN.fullmatch(self.method)
        ):
            raise ValueError(f"method must be an HTTP token, got {self.method!r:.40}")
        if self.callback is not None and not isinstance(self.callback, str):
            object.__setattr__(self, "callback", _method_name("callback", self.callback))
        if self.referrer is not None and not isinstance(self.referrer, str):
            raise ValueError(f"referrer must be a URL string, got {self.referrer!r:.40}")
        if self.cookies is not NO_COOKIES:
            object.__setattr__(self, "cookies", check_cookies(self.cookies))
        if type(self.revisit) is not bool:
            raise ValueError(f"revisit must be true or false, got {self.revisit!r:.40}")
        if (  # the usual request: none of the extras, nothing to check or set
            self.headers is not NO_HEADERS
            or self.errback is not None
            or self.dont_filter is not False
            or self.visit != ""
        ):
            self._check_extras()
        keys = url_keys(self.url)
        method = self.method
        if method == "GET" and not self.body:
            fingerprint = keys.get_fingerprint
        else:
            method = method.upper()
            fingerprint = request_fingerprint(method, keys.canonical, self.body)
            object.__setattr__(self, "method", method)
        object.__setattr__(self, "url", keys.url)
        record = fingerprint
        if self.dont_filter:  # a visit of its own: its own record and items
            record = dont_filter_fingerprint(fingerprint, self.visit)
        object.__setattr__(self, "record_fingerprint", record)
        if self.revisit:
            fingerprint = revisit_fingerprint(fingerprint, self.cookies)
        if self.dont_filter:
            fingerprint = dont_filter_fingerprint(fingerprint, self.visit)
        object.__setattr__(self, "fingerprint", fingerprint)
        object.__setattr__(self, "host", keys.host)

    def _check_extras(self) -> None:
        """Check ``headers``, ``errback``, ``dont_filter`` and ``visit`` (a new one if needed)."""
        if self.headers is not NO_HEADERS:
            object.__setattr__(self, "headers", check_headers(self.headers))
        if self.errback is not None and not isinstance(self.errback, str):
            object.__setattr__(self, "errback", _method_name("errback", self.errback))
        if type(self.dont_filter) is not bool:
            raise ValueError(f"dont_filter must be true or false, got {self.dont_filter!r:.40}")
        if not isinstance(self.visit, str) or len(self.visit) > 100:
            raise ValueError("visit must be a string of at most 100 characters")
        if not self.dont_filter:
            object.__setattr__(self, "visit", "")
        elif not self.visit:
            object.__setattr__(self, "visit", secrets.token_hex(8))

    @classmethod
    def form(
        cls,
        url: str,
        formdata: FormData | None = None,
        method: str = "POST",
        *,
        encoding: str | None = None,
        **kwargs: Any,
    ) -> CrawlRequest:
        """A form submission to ``url``: ``formdata`` urlencoded (`crawlq.request.form`).

        A POST (or any method but GET) carries it as its body with ``Content-Type:
        application/x-www-form-urlencoded`` (unless ``headers`` give one); a GET puts it in
        the URL's query, replacing the query there. The fingerprint covers the method and the
        body (`crawlq.urls.request_fingerprint`), so two submissions with different data are
        two requests.

        Args:
            url: The form's action URL.
            formdata: The fields, a mapping (a list for a repeated name) or ``(name, value)``
                pairs in order.
            method: ``POST`` (default) or ``GET``, any case.
            encoding: How characters are encoded (default UTF-8; a page's form uses the page's).
            **kwargs: The other fields of `CrawlRequest` (``callback``, ``headers``, ``meta``...).

        Raises:
            ValueError: A field name or value that is not a string, or a field of
                `CrawlRequest` that is invalid.
            InvalidURL: ``url`` cannot be crawled.
        """
        query = encode_form(form_pairs(formdata), encoding)
        method = method.upper() if isinstance(method, str) else method
        if method == "GET":
            return cls(with_query(url, query), method="GET", **kwargs)
        headers = dict(kwargs.pop("headers", None) or {})
        if not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = FORM_CONTENT_TYPE
        return cls(url, method=method, body=query.encode("ascii"), headers=headers, **kwargs)

    def rewritten(self, rules: UrlRules) -> CrawlRequest:
        """This request with the crawl's URL rules applied (`crawlq.urls.UrlRules`).

        Returns:
            ``self`` when the rules leave the URL as it is (or would make it one that cannot
            be crawled, which rules that only remove parameters never do), else a copy with
            the rewritten URL and its own fingerprint and host.
        """
        url = rules.apply(self.url)
        if url == self.url:
            return self
        try:
            return dataclasses.replace(self, url=url)
        except InvalidURL:
            return self

    def to_json(self) -> str:
        """Serialise to a JSON object (the format of the Redis inbox and the SQLite frontier).

        Keys: ``url`` (required); ``method``, ``body_b64``, ``priority``, ``depth``,
        ``callback``, ``cb_kwargs``, ``meta``, ``cookies`` (an object of name: value),
        ``revisit``, ``referrer``, ``headers`` (an object of name: value), ``errback``,
        ``dont_filter`` and ``visit`` when they differ from the defaults. Cookie values are in the
        text: it holds secrets wherever it is kept (frontier, broker, dead letters).
        """
        return request_json(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> CrawlRequest:
        """Parse the output of `to_json` (or a hand-written object with at least ``url``).

        The text is untrusted (the Redis inbox, Celery task messages): every field is checked
        for its type and range, and nothing is converted. ``priority`` must be an integer in
        ``±PRIORITY_LIMIT`` (524,287) and ``depth`` an integer in ``0..MAX_DEPTH``: a float
        (``1e999``, ``1.0``), a boolean or a string is refused, as are ``NaN`` and
        ``Infinity`` anywhere. Arrays and objects may nest `MAX_JSON_NESTING` (32) deep at
        most, checked before parsing. A ``referrer`` must be an http(s) URL of at most
        `MAX_REFERRER_CHARS`; it is normalised as a request URL is (`crawlq.urls.normalize`:
        credentials and fragment dropped, unsafe characters percent-encoded), so what a
        producer writes there carries no password into the store and no control character
        into a terminal.

        Raises:
            ValueError: not a JSON object with a string ``url``, nested too deep, or a field
                of the wrong type, form or range (``method`` not a token string,
                ``body_b64`` not base64, ``meta`` or ``cb_kwargs`` not an object,
                ``priority`` or ``depth`` not an integer within its bounds, ``cookies`` not
                an object of strings that `crawlq.web.cookies.check_cookies` accepts,
                ``revisit`` not a boolean, ``referrer`` not a URL string of at most
                `MAX_REFERRER_CHARS`, ``headers`` not an object of strings that
                `crawlq.web.headers.check_headers` accepts, ``errback`` not a string,
                ``dont_filter`` not a boolean). No message quotes a cookie value.
            InvalidURL: the URL (or the referrer) cannot be crawled.
        """
        return cls(**request_fields(text))


def _method_name(field_name: str, method: object) -> str:
    """The name a bound method (``self.parse``) is stored under: requests are JSON.

    The same rule as `crawlq.spider.Response.follow`: the callback travels as its name and
    is looked up on the spider that parses the response (a name the spider has no public
    method for fails there, as a misspelt string would).

    Raises:
        ValueError: ``method`` is neither a string nor a bound method.
    """
    if not inspect.ismethod(method):
        raise ValueError(
            f"{field_name} must be a spider method (self.parse) or its name, got "
            f"{method!r:.60}; requests are JSON, so a {field_name} is stored by name"
        )
    return method.__name__
