"""`CrawlRequest`: one URL to crawl, with how it was found and how to handle it.

A frozen value: the URL is normalised on construction and the request's ``fingerprint``
(dedup key, 20 bytes) and politeness ``host`` are derived from it (`crawlq.urls`). This module
holds, in order:

* the bounds of a request's fields (`PRIORITY_LIMIT`, `MAX_DEPTH`, `MAX_URL_LENGTH` and what a
  JSON request may hold): `CrawlRequest` clamps a priority to `PRIORITY_LIMIT` and refuses a
  depth over `MAX_DEPTH`; `CrawlRequest.from_json` refuses anything out of these bounds;
* `CrawlRequest` itself;
* its JSON form as it crosses processes (`request_json`, `request_fields`): the format of the
  Redis inbox, the SQLite frontier and Celery task messages, one JSON object with ``url`` and
  the fields that differ from their defaults (`CrawlRequest.to_json` lists them). Text read
  back is untrusted: `request_fields` refuses a key it does not know (`JSON_KEYS`: a
  misspelt ``"priorty"`` is an error, not a default), checks every field's type and range
  before a `CrawlRequest` is built from it, refuses ``NaN``, ``Infinity`` and floats where integers
  belong, and measures the nesting of arrays and objects with a linear scan before the
  recursive JSON parser sees it (`MAX_JSON_NESTING`). No error message quotes a cookie value;
* form data as a request body or query (`CrawlRequest.form`,
  `crawlq.spider.FormRequest.from_response`): a submission is written with `encode_form`
  (``application/x-www-form-urlencoded``, WHATWG HTML §4.10.21.7: the ``urlencoded``
  serializer, spaces as ``+``), and a GET form's data replaces the query of its action URL
  (`with_query`), as a browser does.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import difflib
import hashlib
import inspect
import json
import math
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from crawlq.errors import InvalidURL
from crawlq.urls import UrlRules, request_fingerprint, url_keys
from crawlq.web.cookies import NO_COOKIES, check_cookies, revisit_fingerprint
from crawlq.web.headers import NO_HEADERS, check_headers

__all__ = [
    "FORM_CONTENT_TYPE",
    "JSON_KEYS",
    "MAX_DEPTH",
    "MAX_JSON_NESTING",
    "MAX_REFERRER_CHARS",
    "MAX_URL_LENGTH",
    "PRIORITY_LIMIT",
    "CrawlRequest",
    "FormData",
    "encode_form",
    "form_pairs",
    "no_cookies",
    "no_headers",
    "request_fields",
    "request_json",
    "with_query",
]


# -- the bounds of a request's fields -------------------------------------------------------------


PRIORITY_LIMIT = 2**19 - 1
"""Largest priority magnitude, 524,287: a request's priority is clamped to
``-PRIORITY_LIMIT..PRIORITY_LIMIT`` (the Redis frontier's queue scores hold it exactly), and a
JSON request (`CrawlRequest.from_json`: the inbox, task messages) outside that range is
refused."""

MAX_DEPTH = 2**31 - 1
"""Largest request depth (the stores keep it in a 32-bit integer column)."""

MAX_JSON_NESTING = 32
"""Deepest nesting of arrays and objects accepted in a JSON request (`CrawlRequest.from_json`),
checked by a linear scan before the JSON is parsed, so a deeply nested entry never reaches the
recursive parser."""

MAX_URL_LENGTH = 2083
"""Longest URL crawlq follows, in characters (Internet Explorer's historical limit, which
sites keep to; Scrapy's URLLengthMiddleware default). Its home is here, at the bottom of the
layers, so that requests and `crawlq.rules.scope` (which owns the check,
`crawlq.rules.scope.url_too_long`) share one number."""

MAX_REFERRER_CHARS = MAX_URL_LENGTH
"""Longest ``referrer`` a JSON request (`CrawlRequest.from_json`) may carry, in characters:
the longest URL crawlq follows."""


# -- the request ----------------------------------------------------------------------------------


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
        """A form submission to ``url``: ``formdata`` urlencoded (`encode_form`).

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
            ValueError: not a JSON object with a string ``url``, nested too deep, a key that
                is not one of `JSON_KEYS` (the message names it), or a field of the wrong
                type, form or range (``method`` not a token string,
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


# -- its JSON form, as it crosses processes -------------------------------------------------------


_JSON_NESTING_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
"""A JSON string (skipped whole, so brackets inside strings do not count) or a bracket."""


def request_json(request: CrawlRequest) -> str:
    """The JSON text of ``request`` (`CrawlRequest.to_json`)."""
    data: dict[str, Any] = {"url": request.url}
    if request.method != "GET":
        data["method"] = request.method
    if request.body:
        data["body_b64"] = base64.b64encode(request.body).decode("ascii")
    if request.priority:
        data["priority"] = request.priority
    if request.depth:
        data["depth"] = request.depth
    if request.callback:
        data["callback"] = request.callback
    if request.cb_kwargs:
        data["cb_kwargs"] = dict(request.cb_kwargs)
    if request.meta:
        data["meta"] = dict(request.meta)
    _handling_json(request, data)
    return json.dumps(data, separators=(",", ":"))


def _handling_json(request: CrawlRequest, data: dict[str, Any]) -> None:
    """Add the fields of ``request`` that say how to send and settle it (beyond the URL's)."""
    if request.referrer:
        data["referrer"] = request.referrer
    if request.cookies:
        data["cookies"] = dict(request.cookies)
    if request.revisit:
        data["revisit"] = True
    if request.headers:
        data["headers"] = dict(request.headers)
    if request.errback:
        data["errback"] = request.errback
    if request.dont_filter:
        data["dont_filter"] = True
        data["visit"] = request.visit


JSON_KEYS = frozenset(
    {
        "url",
        "method",
        "body_b64",
        "priority",
        "depth",
        "callback",
        "cb_kwargs",
        "meta",
        "cookies",
        "revisit",
        "referrer",
        "headers",
        "errback",
        "dont_filter",
        "visit",
    }
)
"""Every key of a request's JSON form (`request_json` writes them, `request_fields` reads
them); any other key is refused, so a misspelt ``"priorty"`` is not silently dropped."""


def _check_keys(data: Mapping[str, Any]) -> None:
    """Refuse a key that is not one of `JSON_KEYS`, naming it (and the key it may mean)."""
    unknown = sorted(k for k in data if k not in JSON_KEYS)
    if not unknown:
        return
    key = unknown[0]
    close = difflib.get_close_matches(key, JSON_KEYS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    more = f" and {len(unknown) - 1} more" if len(unknown) > 1 else ""
    raise ValueError(
        f"unknown key {key!r:.60}{more}{hint}; a request's keys are " + ", ".join(sorted(JSON_KEYS))
    )


def request_fields(text: str | bytes) -> dict[str, Any]:
    """The checked keyword arguments of a `CrawlRequest` from JSON text.

    The rules and errors are those of `CrawlRequest.from_json`, which builds
    the request from them (its own checks then run as for any request).
    """
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")  # UnicodeDecodeError is a ValueError
    nesting = _json_nesting(text)
    if nesting > MAX_JSON_NESTING:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_NESTING} levels")
    data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        if "cookie" in text.lower():  # never echo cookie values
            raise ValueError("not a crawl request object with a url string")
        raise ValueError(f"not a crawl request object: {text!r:.200}")
    _check_keys(data)
    method = data.get("method", "GET")
    if not isinstance(method, str):
        raise ValueError(f"method must be a string, got {method!r:.40}")
    body = data.get("body_b64")
    if body is not None and not isinstance(body, str):
        raise ValueError("body_b64 must be a base64 string")
    try:
        body_bytes = base64.b64decode(body, validate=True) if body else b""
    except binascii.Error as exc:
        raise ValueError(f"body_b64 is not base64: {exc}") from exc
    fields: dict[str, Any] = {
        "url": data["url"],
        "method": method,
        "body": body_bytes,
        "priority": _bounded_int(data, "priority", -PRIORITY_LIMIT, PRIORITY_LIMIT),
        "depth": _bounded_int(data, "depth", 0, MAX_DEPTH),
        "callback": data.get("callback"),
        "cb_kwargs": data.get("cb_kwargs") or {},
        "meta": data.get("meta") or {},
        "cookies": data.get("cookies") or NO_COOKIES,
        "revisit": data.get("revisit", False),
        "referrer": _referrer(data.get("referrer")),
        "headers": _headers(data.get("headers")),
        "errback": data.get("errback"),
        "dont_filter": data.get("dont_filter", False),
        "visit": data.get("visit", ""),
    }
    return fields


def _headers(value: Any) -> Mapping[str, str]:
    """A JSON request's ``headers``: an object of strings (`CrawlRequest` checks each)."""
    if value is None:
        return NO_HEADERS
    if not isinstance(value, dict):
        raise ValueError(f"headers must be an object of name: value, got {value!r:.40}")
    return check_headers(value)


def _referrer(value: Any) -> str | None:
    """A JSON request's ``referrer``, checked and normalised (see `CrawlRequest.from_json`)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"referrer must be a URL string, got {value!r:.40}")
    if len(value) > MAX_REFERRER_CHARS:
        raise ValueError(f"referrer longer than {MAX_REFERRER_CHARS} characters")
    return url_keys(value).url  # cached: the links of one page share their referrer


def _json_nesting(text: str) -> int:
    """How deep arrays and objects nest in ``text``, up to one past `MAX_JSON_NESTING`.

    Linear and not recursive. Exact for valid JSON; for invalid JSON any answer will do,
    since the parser refuses it anyway.
    """
    if text.count("[") + text.count("{") <= MAX_JSON_NESTING:
        return 0  # cannot nest deeper than it has brackets
    depth = 0
    for match in _JSON_NESTING_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_JSON_NESTING:
                return depth
        elif token in "]}":
            depth -= 1
    return 0


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a request may hold")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _bounded_int(data: Mapping[str, Any], name: str, low: int, high: int) -> int:
    """``data[name]`` (0 when absent) if it is an integer in ``low..high``."""
    value = data.get(name, 0)
    if type(value) is not int:
        raise ValueError(f"{name} must be an integer, got {value!r:.40}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in {low}..{high}, got {value!r:.40}")
    return value


# -- form data as a request body or query ---------------------------------------------------------


FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
"""The ``Content-Type`` of a urlencoded form body."""

FormData = Mapping[str, str | Sequence[str] | None] | Iterable[tuple[str, str]]
"""A form's data: name to value (a list of values for a repeated name; None in a mapping
removes a field of the page's form, `crawlq.spider.FormRequest`), or ``(name, value)``
pairs in order."""


def form_pairs(formdata: FormData | None) -> list[tuple[str, str]]:
    """``formdata`` as ``(name, value)`` pairs in order (None values left out).

    Raises:
        ValueError: A name or value that is not a string.
    """
    if formdata is None:
        return []
    items: Iterable[tuple[object, object]]
    items = formdata.items() if isinstance(formdata, Mapping) else formdata
    pairs: list[tuple[str, str]] = []
    for name, value in items:
        if value is None:
            continue
        values = [value] if isinstance(value, str) else value
        if not isinstance(name, str) or not isinstance(values, Iterable):
            raise ValueError(f"form data: {name!r:.40} must be a string name with string values")
        for one in values:
            if not isinstance(one, str):
                raise ValueError(f"form data: the value of {name!r:.40} is not a string")
            pairs.append((name, one))
    return pairs


def encode_form(pairs: Sequence[tuple[str, str]], encoding: str | None = None) -> str:
    """The urlencoded form of ``pairs`` (``a=1&b=x+y``), characters in ``encoding`` (UTF-8)."""
    return urlencode(list(pairs), encoding=encoding or "utf-8", errors="xmlcharrefreplace")


def with_query(url: str, query: str) -> str:
    """``url`` with its query replaced by ``query`` (a GET form's submission), no fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
