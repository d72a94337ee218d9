"""Plain value types that move between layers: requests, leases and fetch results.

Priority semantics (docs/architecture.md invariant 5): a *higher* ``priority`` is served sooner;
equal priorities are served first in, first out. When a spider does not choose a priority,
a followed link gets ``priority = -depth`` (see `crawlq.spider.Response.follow`), so index
pages near the seeds run before leaf pages.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crawlq.cookies import NO_COOKIES, check_cookies, revisit_fingerprint
from crawlq.decode import Sniffed, sniff
from crawlq.errors import InvalidURL
from crawlq.urls import UrlRules, request_fingerprint, url_keys

__all__ = [
    "MAX_DEPTH",
    "MAX_JSON_NESTING",
    "MAX_REFERRER_CHARS",
    "PRIORITY_LIMIT",
    "CrawlRequest",
    "FetchResult",
    "Lease",
    "RawExchange",
]

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

MAX_REFERRER_CHARS = 2083
"""Longest ``referrer`` a JSON request (`CrawlRequest.from_json`) may carry, in characters:
the longest URL crawlq follows (`crawlq.scope.MAX_URL_LENGTH`)."""

_JSON_NESTING_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
"""A JSON string (skipped whole, so brackets inside strings do not count) or a bracket."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP method is a token (RFC 9110 §9.1, §5.6.2)."""


def _no_cookies() -> Mapping[str, str]:
    return NO_COOKIES  # shared and read-only: no allocation per request


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
        cb_kwargs: Extra keyword arguments for the callback; must be JSON-serialisable.
        meta: Free-form JSON-serialisable data carried to the response (``response.meta``).
        referrer: The URL of the page that linked to (or redirected to) this one, or None
            for a seed. Set by the engine for every request a page yields
            (`crawlq.engine.step`), recorded on the URL's page or dead letter; not part of
            the fingerprint or of equality.
        cookies: Cookies sent with this request, name to value, besides the worker's jar
            (`crawlq.fetch`; these win over the jar's of the same name). Checked by
            `crawlq.cookies.check_cookies`; a read-only mapping. Not in ``repr`` (values are
            secrets) and, except for a ``revisit``, not in the fingerprint.
        revisit: Set by the engine only (`crawlq.engine.step`): this request is a redirect hop
            back to a URL of its own redirect chain. Its ``fingerprint`` then covers its
            ``cookies`` too (`crawlq.cookies.revisit_fingerprint`), so that the hop of a cookie
            wall (``302 Set-Cookie`` to the same URL) is not deduplicated against the request
            that got the redirect.
        fingerprint: The dedup key (`crawlq.urls.request_fingerprint` of method, canonical URL
            and body; for a ``revisit``, with its cookies).
        record_fingerprint: The key of the request's record in the store: the fingerprint
            without the revisit part, so the record of a revisit replaces the redirect's
            record of the same URL (one record per URL).

    Raises:
        InvalidURL: ``url`` is not an absolute http(s) URL.
        ValueError: ``method`` is not an HTTP token, ``priority`` is not an int, ``depth``
            is not an int in ``0..MAX_DEPTH``, ``callback`` is not a string, ``meta`` or
            ``cb_kwargs`` is not a mapping (a JSON object), ``referrer`` is neither None nor
            a string, or ``cookies`` breaks a rule of `crawlq.cookies.check_cookies` (the
            message starts with ``cookies:``).
    """

    url: str
    method: str = "GET"
    body: bytes = b""
    priority: int = 0
    depth: int = 0
    callback: str | None = None
    cb_kwargs: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    cookies: Mapping[str, str] = field(default_factory=_no_cookies, repr=False)
    revisit: bool = False
    referrer: str | None = field(default=None, repr=False, compare=False)
    fingerprint: bytes = field(init=False, repr=False, compare=False)
    host: str = field(init=False, repr=False, compare=False)
    record_fingerprint: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
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
            not isinstance(self.method, str) or not _TOKEN.fullmatch(self.method)
        ):
            raise ValueError(f"method must be an HTTP token, got {self.method!r:.40}")
        if self.callback is not None and not isinstance(self.callback, str):
            raise ValueError(f"callback must be a method name, got {self.callback!r:.40}")
        if self.referrer is not None and not isinstance(self.referrer, str):
            raise ValueError(f"referrer must be a URL string, got {self.referrer!r:.40}")
        if self.cookies is not NO_COOKIES:
            object.__setattr__(self, "cookies", check_cookies(self.cookies))
        if type(self.revisit) is not bool:
            raise ValueError(f"revisit must be true or false, got {self.revisit!r:.40}")
        keys = url_keys(self.url)
        method = self.method
        if method == "GET" and not self.body:
            fingerprint = keys.get_fingerprint
        else:
            method = method.upper()
            fingerprint = request_fingerprint(method, keys.canonical, self.body)
            object.__setattr__(self, "method", method)
        object.__setattr__(self, "url", keys.url)
        object.__setattr__(self, "record_fingerprint", fingerprint)
        if self.revisit:
            fingerprint = revisit_fingerprint(fingerprint, self.cookies)
        object.__setattr__(self, "fingerprint", fingerprint)
        object.__setattr__(self, "host", keys.host)

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
        ``revisit``, ``referrer`` when they differ from the defaults. Cookie values are in the
        text: it holds secrets wherever it is kept (frontier, broker, dead letters).
        """
        data: dict[str, Any] = {"url": self.url}
        if self.method != "GET":
            data["method"] = self.method
        if self.body:
            data["body_b64"] = base64.b64encode(self.body).decode("ascii")
        if self.priority:
            data["priority"] = self.priority
        if self.depth:
            data["depth"] = self.depth
        if self.callback:
            data["callback"] = self.callback
        if self.cb_kwargs:
            data["cb_kwargs"] = dict(self.cb_kwargs)
        if self.meta:
            data["meta"] = dict(self.meta)
        if self.referrer:
            data["referrer"] = self.referrer
        if self.cookies:
            data["cookies"] = dict(self.cookies)
        if self.revisit:
            data["revisit"] = True
        return json.dumps(data, separators=(",", ":"))

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
                an object of strings that `crawlq.cookies.check_cookies` accepts,
                ``revisit`` not a boolean, ``referrer`` not a URL string of at most
                `MAX_REFERRER_CHARS`). No message quotes a cookie value.
            InvalidURL: the URL (or the referrer) cannot be crawled.
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
        return cls(
            url=data["url"],
            method=method,
            body=body_bytes,
            priority=_bounded_int(data, "priority", -PRIORITY_LIMIT, PRIORITY_LIMIT),
            depth=_bounded_int(data, "depth", 0, MAX_DEPTH),
            callback=data.get("callback"),
            cb_kwargs=data.get("cb_kwargs") or {},
            meta=data.get("meta") or {},
            cookies=data.get("cookies") or NO_COOKIES,
            revisit=data.get("revisit", False),
            referrer=_referrer(data.get("referrer")),
        )


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


@dataclass(frozen=True, slots=True)
class Lease:
    """A request handed to one worker until ``deadline_ms``.

    Attributes:
        lease_id: Opaque id, unique per delivery.
        request: The leased request.
        attempt: 1 for the first delivery, +1 per `Frontier.retry` and per expired lease.
        worker_id: Who holds it.
        deadline_ms: Unix time in milliseconds when the lease returns to the queue unless it is
            renewed or settled (ack, retry, dead, release).
        host_down: The request's host was declared unreachable by its circuit breaker
            (`crawlq.politeness`): dead-letter it as ``host_unreachable`` without a request.
    """

    lease_id: str
    request: CrawlRequest
    attempt: int
    worker_id: str
    deadline_ms: int
    host_down: bool = False


@dataclass(frozen=True, slots=True)
class RawExchange:
    """The last HTTP exchange of a fetch as it went over the wire, for archiving (WARC).

    Attributes:
        method: The request method sent.
        request_headers: Request headers as sent, in order, as ``(name, value)`` pairs.
        request_body: Request body bytes.
        http_version: HTTP version of the response, such as ``"1.1"``.
        reason: Reason phrase of the response status line ("" when there is none).
        response_headers: Response headers as received: original names, order and
            repetitions, values decoded as ISO-8859-1 (RFC 9110 §5.5), so every byte
            survives. They describe the body on the wire: ``Content-Encoding`` and
            ``Transfer-Encoding`` may apply to it, unlike to `FetchResult.body`.
    """

    method: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: bytes
    http_version: str
    reason: str
    response_headers: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class FetchResult:
    """A complete HTTP response, as returned by `crawlq.fetch.Fetcher.fetch`.

    Attributes:
        url: The requested URL.
        final_url: The URL of the last response after redirects (== ``url`` without any).
        status: HTTP status code of the last response.
        headers: Response headers, names lower-cased; repeated headers joined with ", ".
        body: Decoded-transfer body bytes (gzip/deflate/br removed), at most the size cap.
        encoding: Character encoding chosen for ``text`` (header, then ``<meta>``, then
            detection), or None for non-text bodies.
        text: The body decoded with ``encoding`` ("" for non-text bodies).
        elapsed_s: Seconds from sending the first request to the end of the body.
        redirects: The URLs redirected through, in order, excluding ``final_url``.
        exchange: The request and the response head of the last hop as on the wire (for
            WARC records), or None when the fetcher did not record it.
        location: For a redirect response that was not followed, its target resolved
            against ``final_url`` and normalised; else None.
        sniffed: Whether the body is HTML, and why a body labelled HTML is binary
            (`crawlq.decode.sniff`, derived from ``headers`` and ``body``).
        location_cookies: For a redirect not followed, the cookies to send with its target:
            the request's own cookies (when the target is on the same host and not a
            downgrade from https) updated by the response's ``Set-Cookie`` headers, kept
            where RFC 6265 §5.4 sends them to the target (domain, path, secure); empty when
            cookies are off (`crawlq.fetch.Fetcher`).
    """

    url: str
    final_url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    encoding: str | None
    text: str
    elapsed_s: float
    redirects: tuple[str, ...] = ()
    exchange: RawExchange | None = None
    location: str | None = None
    location_cookies: Mapping[str, str] = field(default_factory=_no_cookies, repr=False)
    sniffed: Sniffed = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sniffed", sniff(self.headers.get("content-type"), self.body))

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower-cased ("" when absent)."""
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    @property
    def is_html(self) -> bool:
        """True for a body to parse as HTML (`crawlq.decode.sniff`).

        A text/html or application/xhtml+xml body that is not binary, or a body without a
        ``Content-Type`` that starts like HTML (WHATWG MIME Sniffing §7.1).
        """
        return self.sniffed.html

    @property
    def binary(self) -> str | None:
        """Why a body labelled HTML is binary (``"application/pdf signature"``), else None."""
        return self.sniffed.binary
