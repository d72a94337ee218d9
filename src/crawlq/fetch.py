r"""HTTP fetching: one pooled aiohttp session, manual redirects, a body cap, classified errors.

`Fetcher.fetch` either returns a complete `FetchResult` or raises a `FetchError` that is
already classified for the retry policy (`crawlq.retry`): no aiohttp exception escapes.
This is the only module that imports aiohttp (besides `crawlq.testing`).

Rules and their sources:

* Redirects (RFC 9110 §15.4) are followed by hand so that each hop can be checked: 301, 302,
  303, 307 and 308 with a ``Location``, resolved against the current URL (RFC 3986 §5).
  303 switches to GET (§15.4.4); so do 301 and 302 after a POST, as browsers do (§15.4.2,
  §15.4.3, WHATWG Fetch "HTTP-redirect fetch"). 307/308 keep the method and body.
  Credentials (``Authorization``, ``Cookie``) are not sent on to another origin. The
  ``Location`` is read from its bytes and resolved as browsers do (WHATWG URL Standard,
  `crawlq.urls.decode_location` and `crawlq.urls.resolve`): ``///host/p`` goes to ``host``,
  a latin-1 ``/caf\xe9`` to ``/caf%E9``.
* Content codings (RFC 9110 §8.4) are undone by `crawlq.codings`, not by aiohttp (whose
  ``auto_decompress`` handles one coding only and passes any other list through still
  coded): ``gzip, gzip`` and ``deflate, gzip`` are decoded in reverse order, an unknown
  coding is an error, and ``max_body_bytes`` caps the decoded body as it streams.
* Header values are decoded without loss and without lone surrogates (`_joined_headers`):
  nothing a server puts in a header can fail the code that stores or logs it.
* Retryable statuses: 408, 429 and 5xx raise `RetryableStatus` carrying the server's
  ``Retry-After`` (RFC 9110 §10.2.3) in seconds; every other status is returned.
* Time: one budget of ``timeout_s`` covers the whole fetch, redirects included, so a fetch
  never outlives the lease that runs it.
* Cookies (RFC 6265), unless ``cookies=False``: the session keeps a jar (`CookieJar`) for
  the life of the `Fetcher`, one per job in each worker process, and sends its cookies back
  as a browser would, plus the cookies a fetch is given (they win over the jar's). The jar
  keeps cookies of IP-address hosts too (aiohttp's ``unsafe=True``, as browsers do: such a
  cookie goes back to that exact address only), sends values as received
  (``quote_cookie=False``), and bounds its memory: a ``Set-Cookie`` over
  `MAX_SET_COOKIE_CHARS` is ignored, and past `MAX_JAR_COOKIES` cookies the jar starts over
  empty. A redirect not followed returns, in ``FetchResult.location_cookies``, the cookies
  its target must get (`_redirect_cookies`), since the crawl queues the target as a request
  of its own that another worker may fetch. A followed redirect carries them the same way.
* Private addresses (`crawlq.addresses`): the connector's resolver is wrapped by
  `GuardedResolver`, which drops every address the `AddressGuard` refuses, so a connection
  can only go to an allowed address (a DNS answer that changes between two lookups, "DNS
  rebinding", gains nothing). aiohttp skips the resolver for IP-literal hosts
  (``TCPConnector._resolve_host``), so `Fetcher` judges those itself before each request.
  Every request goes through both: the URL's own, robots.txt, every redirect hop.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.cookies import Morsel, SimpleCookie
from types import TracebackType
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.http_exceptions import BadHttpMessage
from aiohttp.typedefs import LooseCookies
from yarl import URL

from crawlq.addresses import AddressGuard
from crawlq.codings import (
    ACCEPT_ENCODING,
    BodyDecoder,
    CodingError,
    UnsupportedCoding,
    parse_codings,
)
from crawlq.cookies import NO_COOKIES, fit_cookies
from crawlq.decode import decode_body
from crawlq.errors import (
    BodyTooLarge,
    FetchError,
    InvalidURL,
    PermanentFetchError,
    PrivateAddressError,
    RetryableStatus,
    TooManyRedirects,
    TransientFetchError,
)
from crawlq.request import FetchResult, RawExchange
from crawlq.retry import is_retryable_status, parse_retry_after
from crawlq.settings import Settings
from crawlq.urls import decode_location, normalize, url_keys

__all__ = [
    "MAX_JAR_COOKIES",
    "MAX_SET_COOKIE_CHARS",
    "REDIRECT_STATUSES",
    "AddressRefused",
    "CookieJar",
    "Fetcher",
    "GuardedResolver",
    "RedirectGuard",
    "redirected_method",
]

logger = logging.getLogger(__name__)

RedirectGuard = Callable[[str], str | None]
"""Called with each redirect target: None to follow it, or a reason string to stop there."""

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
"""Statuses whose ``Location`` is a redirect to follow (RFC 9110 §15.4)."""
_NO_BODY_STATUSES = frozenset({204, 304})
_CHUNK_BYTES = 64 * 1024
_DNS_CACHE_TTL_S = 60
_MAX_DETAIL_CHARS = 300  # aiohttp quotes whole bad status lines into its messages
_DEFAULT_HEADERS = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Accept-Encoding": ACCEPT_ENCODING,
}
_BODY_HEADERS = frozenset({"content-type", "content-length", "content-encoding"})
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})

_NO_URL = URL()

MAX_JAR_COOKIES = 3000
"""Cookies a worker's jar holds at most (RFC 6265 §6.1: "at least 3000 cookies total"); one
more and it starts over empty (the cookies of hosts a crawl is done with go with it)."""

MAX_SET_COOKIE_CHARS = 8192
"""Longest ``Set-Cookie`` header stored in a jar, in characters; a longer one is ignored (a
cookie's name and value may take 4096 bytes, RFC 6265 §6.1, besides its attributes)."""


class CookieJar(aiohttp.CookieJar):
    """aiohttp's RFC 6265 jar, with its memory bounded (module docstring).

    Built with ``unsafe=True`` (keep cookies of IP-address hosts, for that address only) and
    ``quote_cookie=False`` (send values exactly as the server set them).
    """

    def __init__(self) -> None:
        super().__init__(unsafe=True, quote_cookie=False)

    def update_cookies(self, cookies: LooseCookies, response_url: URL = _NO_URL) -> None:
        """Store ``cookies`` (aiohttp < 3.14 passes a response's cookies here)."""
        items = cookies.items() if isinstance(cookies, Mapping) else cookies
        small = [(n, c) for n, c in items if _set_cookie_chars(n, c) <= MAX_SET_COOKIE_CHARS]
        super().update_cookies(small, response_url)
        self._bound()

    def update_cookies_from_headers(self, headers: Sequence[str], response_url: URL) -> None:
        """Store the cookies of raw ``Set-Cookie`` headers (aiohttp >= 3.14 calls this)."""
        small = [h for h in headers if len(h) <= MAX_SET_COOKIE_CHARS]
        super().update_cookies_from_headers(small, response_url)
        self._bound()

    def _bound(self) -> None:
        if len(self) > MAX_JAR_COOKIES:
            logger.info("cookie jar over %d cookies: starting over empty", MAX_JAR_COOKIES)
            self.clear()


def _set_cookie_chars(name: str, cookie: object) -> int:
    """How long the ``Set-Cookie`` header of a cookie is (or, for a bare value, its pair)."""
    if isinstance(cookie, Morsel):
        return len(cookie.OutputString())
    return len(name) + len(str(cookie)) + 1


class AddressRefused(Exception):
    """Raised by `GuardedResolver` when every address of a host is refused.

    Not an `OSError`, so that aiohttp does not turn it into a DNS error: it leaves
    ``session.request`` as is and `Fetcher` turns it into `PrivateAddressError`.

    Attributes:
        host: The host looked up.
        range_name: The refused range of (the first of) its addresses (`crawlq.addresses`).
    """

    def __init__(self, host: str, range_name: str) -> None:
        super().__init__(f"{host} is on a {range_name} address")
        self.host = host
        self.range_name = range_name


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that returns only the addresses an `AddressGuard` allows.

    aiohttp connects only to addresses its resolver returned (and caches them, by host, for
    the connector's DNS cache time), so what this drops is never connected to.

    Args:
        guard: The guard to apply.
        inner: The resolver that does the lookups (default: aiohttp's ``DefaultResolver``,
            created on first use inside the running event loop).

    Raises:
        AddressRefused: From `resolve`, when the host has addresses and all are refused.
    """

    def __init__(self, guard: AddressGuard, inner: AbstractResolver | None = None) -> None:
        self.guard = guard
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve ``host`` with the inner resolver and keep the allowed addresses."""
        if self._inner is None:
            self._inner = aiohttp.DefaultResolver()
        infos = await self._inner.resolve(host, port, family)
        if self.guard.exempt(host):
            return infos
        kept = _allowed(self.guard, host, infos)
        if infos and not kept:
            range_name = self.guard.check(host, infos[0]["host"]) or "refused"
            raise AddressRefused(host, range_name)
        if len(kept) < len(infos):
            logger.debug("%s: dropped %d private addresses", host, len(infos) - len(kept))
        return kept

    async def close(self) -> None:
        """Close the inner resolver."""
        if self._inner is not None:
            await self._inner.close()


def _allowed(guard: AddressGuard, host: str, infos: Sequence[ResolveResult]) -> list[ResolveResult]:
    return [info for info in infos if guard.check(host, info["host"]) is None]


@dataclass(slots=True)
class _Hop:
    """One HTTP exchange: the response, or where to go next when it is a followed redirect."""

    status: int
    headers: dict[str, str]
    body: bytes
    next_url: str | None
    exchange: RawExchange | None = None
    location: str | None = None  # a redirect not followed: its resolved target
    cookies: Mapping[str, str] = field(default_factory=lambda: NO_COOKIES)  # a redirect's target


@dataclass(slots=True)
class _Attempt:
    """One fetch in progress: its fixed inputs and the request of the current hop."""

    url: str  # as the caller gave it; names every error
    current: str
    method: str
    body: bytes
    headers: dict[str, str]
    deadline_s: float  # time.perf_counter() seconds
    guard: RedirectGuard | None
    truncate_body_bytes: int | None
    cookies: Mapping[str, str] = field(default_factory=lambda: NO_COOKIES)  # sent with this hop
    redirects: list[str] = field(default_factory=list)

    def follow(self, status: int, next_url: str, cookies: Mapping[str, str]) -> None:
        """Move to ``next_url``, adjusting method, body, headers and cookies (module docstring)."""
        method, keep_body = redirected_method(status, self.method)
        if method != self.method or not keep_body:
            self.method, self.body = method, b""
            self.headers = {k: v for k, v in self.headers.items() if k.lower() not in _BODY_HEADERS}
        if _origin(self.current) != _origin(next_url):
            drop = _CREDENTIAL_HEADERS
            self.headers = {k: v for k, v in self.headers.items() if k.lower() not in drop}
        self.redirects.append(self.current)
        self.current = next_url
        self.cookies = cookies


def redirected_method(status: int, method: str) -> tuple[str, bool]:
    """The method of the request that follows a redirect, and whether it keeps the body.

    303 switches to GET (RFC 9110 §15.4.4); so do 301 and 302 after a POST, as browsers do
    (§15.4.2, §15.4.3, WHATWG Fetch "HTTP-redirect fetch"). 307 and 308 keep both.

    Args:
        status: The redirect status.
        method: The method of the redirected request, upper case.
    """
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        return "GET", False
    return method, True


class Fetcher:
    """Fetches URLs over one pooled aiohttp session (keep-alive, DNS cache).

    Use as ``async with Fetcher(user_agent=...) as fetcher:`` or call `close` when done. The
    session is created lazily on the first fetch, inside the running event loop.

    Args:
        user_agent: The ``User-Agent`` header sent with every request.
        timeout_s: Seconds allowed for a whole fetch (connect, headers, body, redirects), and
            for one socket read.
        connect_timeout_s: Seconds allowed to get a connection (pool wait + TCP/TLS connect).
        max_body_bytes: Largest body accepted, in bytes, after content decoding.
        max_redirects: Redirects followed per fetch before `TooManyRedirects`.
        max_connections: Connections open at once across all hosts.
        record_exchanges: Keep each response's status line and raw headers, and the request
            headers sent, in `FetchResult.exchange` (for WARC archives); off by default, as
            it costs time on every fetch.
        address_guard: Which addresses may be connected to (`crawlq.addresses`). Default:
            the guard is on with no exempt host, so loopback, private, link-local… addresses
            are refused with `PrivateAddressError`; ``AddressGuard(allow_private=True)``
            turns it off.
        resolver: The DNS resolver that `GuardedResolver` wraps (default: aiohttp's).
        cookies: Keep a cookie jar and send the cookies a fetch is given (module docstring);
            False: no cookie is stored or sent, and ``location_cookies`` is always empty.

    Raises:
        ValueError: A limit is not positive (``max_redirects`` may be 0).
    """

    def __init__(
        self,
        *,
        user_agent: str,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        max_body_bytes: int = 10 * 1024 * 1024,
        max_redirects: int = 10,
        max_connections: int = 100,
        record_exchanges: bool = False,
        address_guard: AddressGuard | None = None,
        resolver: AbstractResolver | None = None,
        cookies: bool = True,
    ) -> None:
        if min(timeout_s, connect_timeout_s, max_body_bytes, max_connections) <= 0:
            raise ValueError("timeouts, max_body_bytes and max_connections must be positive")
        if max_redirects < 0:
            raise ValueError(f"max_redirects must not be negative, got {max_redirects}")
        self.user_agent = user_agent
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._max_body_bytes = max_body_bytes
        self._max_redirects = max_redirects
        self._max_connections = max_connections
        self._record_exchanges = record_exchanges
        self.address_guard = AddressGuard() if address_guard is None else address_guard
        self._resolver = resolver
        self.cookies = cookies
        self._session: aiohttp.ClientSession | None = None
        self._timeout = self._client_timeout(timeout_s)

    @classmethod
    def from_settings(cls, settings: Settings, *, max_connections: int | None = None) -> Fetcher:
        """A fetcher with the crawl's limits; it records raw exchanges when WARC is on.

        Its private-address guard allows the job's ``seed_hosts`` (or everything with
        ``allow_private``), so both engines apply the same guard.

        Args:
            settings: User agent, timeouts, body and redirect limits, ``warc_dir``,
                ``allow_private``, ``seed_hosts``, ``cookies_enabled``.
            max_connections: Connections at once (default: ``settings.concurrency``).
        """
        s = settings
        return cls(
            user_agent=s.user_agent,
            timeout_s=s.timeout_s,
            connect_timeout_s=s.connect_timeout_s,
            max_body_bytes=s.max_body_bytes,
            max_redirects=s.max_redirects,
            max_connections=max_connections or s.concurrency,
            record_exchanges=s.warc_dir is not None,
            address_guard=AddressGuard.of(allow_private=s.allow_private, hosts=s.seed_hosts),
            cookies=s.cookies_enabled,
        )

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session and its connections. A later `fetch` opens a new session."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        cookies: Mapping[str, str] | None = None,
        redirect_guard: RedirectGuard | None = None,
        truncate_body_bytes: int | None = None,
        follow_redirects: bool = True,
    ) -> FetchResult:
        """Fetch ``url``, following redirects, and return the complete response.

        Args:
            url: Absolute http(s) URL (normalised here with `crawlq.urls.normalize`).
            method: HTTP method.
            body: Request body bytes.
            headers: Extra request headers; they override the defaults (``User-Agent``,
                ``Accept``, ``Accept-Encoding: gzip, deflate, br``).
            cookies: Cookies to send besides the jar's (name to value, already checked by
                `crawlq.cookies.check_cookies`); they win over the jar's of the same name,
                and are not stored in the jar. Ignored when the fetcher keeps no cookies.
            redirect_guard: Called with each redirect target before it is followed: None
                follows it; a string (the reason) stops, and the 3xx response itself is
                returned so the caller can record it.
            follow_redirects: False: return a redirect response as it is, with its resolved
                target in ``FetchResult.location`` (the crawl queues each hop as a request of
                its own, so that every request passes the same gate).
            truncate_body_bytes: Read at most this many body bytes and return them instead
                of raising `BodyTooLarge` (for robots.txt, RFC 9309 §2.5). None: the cap
                ``max_body_bytes`` applies and a larger body is an error.

        Returns:
            The last response. ``url`` is the normalised request URL, ``final_url`` the last
            URL fetched, ``redirects`` the URLs that answered with a followed redirect (so
            ``len(redirects)`` is the number of hops), ``elapsed_s`` seconds from the first
            request to the end of the last body.

        Raises:
            RetryableStatus: HTTP 408, 429 or 5xx (``retry_after_s`` from ``Retry-After``).
            TransientFetchError: Network failure; ``reason`` is ``timeout``, ``dns_error``,
                ``connect_error``, ``connection_reset``, ``payload_error`` (truncated body),
                ``protocol_error`` (another unexpected answer) or ``client_error``.
            BodyTooLarge: The body exceeds ``max_body_bytes`` (by ``Content-Length`` or
                while reading, counting decoded bytes and bytes received); no partial body
                is ever returned.
            TooManyRedirects: More than ``max_redirects`` redirects (this ends loops too).
            PrivateAddressError: The host of ``url`` or of a redirect hop is (or resolves
                only to) an address the guard refuses; nothing was sent to it.
            PermanentFetchError: ``invalid_url`` (``url`` cannot be fetched),
                ``bad_redirect`` (a ``Location`` that is not http(s)), ``tls_error`` (the
                server's certificate does not verify), ``unsupported_content_coding`` (a
                ``Content-Encoding`` that `crawlq.codings` cannot undo: the body is not
                read) or ``protocol_error`` (a response that breaks HTTP syntax: a status
                line, header or ``Location`` over the size limit, a bad header, garbage
                after the body, a body that is not valid data of its content coding).
        """
        try:
            start_url = url_keys(url).url  # cached: the frontier normalised it already
        except InvalidURL as exc:
            raise PermanentFetchError(url, "invalid_url", exc.reason) from exc
        session = self._ensure_session()
        start_s = time.perf_counter()
        attempt = _Attempt(
            url=url,
            current=start_url,
            method=method.upper(),
            body=body,
            headers=dict(headers or {}),
            deadline_s=start_s + self._timeout_s,
            guard=redirect_guard if follow_redirects else _not_followed,
            truncate_body_bytes=truncate_body_bytes,
            cookies=(cookies or NO_COOKIES) if self.cookies else NO_COOKIES,
        )
        while (hop := await self._exchange(session, attempt)).next_url is not None:
            attempt.follow(hop.status, hop.next_url, hop.cookies)
        encoding, text = decode_body(hop.headers.get("content-type"), hop.body)
        return FetchResult(
            url=start_url,
            final_url=attempt.current,
            status=hop.status,
            headers=hop.headers,
            body=hop.body,
            encoding=encoding,
            text=text,
            elapsed_s=time.perf_counter() - start_s,
            redirects=tuple(attempt.redirects),
            exchange=hop.exchange,
            location=hop.location,
            location_cookies=hop.cookies,
        )

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            resolver: AbstractResolver | None = self._resolver
            if not self.address_guard.allow_private:
                resolver = GuardedResolver(self.address_guard, resolver)
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                use_dns_cache=True,
                ttl_dns_cache=_DNS_CACHE_TTL_S,
                resolver=resolver,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": self.user_agent, **_DEFAULT_HEADERS},
                timeout=self._timeout,
                raise_for_status=False,
                auto_decompress=False,  # crawlq.codings decodes: layered codings, bounded
                cookie_jar=CookieJar() if self.cookies else aiohttp.DummyCookieJar(),
                max_field_size=65536,  # real sites send long Set-Cookie / CSP headers
            )
        return self._session

    def _client_timeout(self, total_s: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            total=total_s, connect=self._connect_timeout_s, sock_read=self._timeout_s
        )

    async def _exchange(self, session: aiohttp.ClientSession, attempt: _Attempt) -> _Hop:
        """Send the current request of ``attempt`` and read its response."""
        url, current, method = attempt.url, attempt.current, attempt.method
        remaining_s = attempt.deadline_s - time.perf_counter()
        if remaining_s <= 0:
            raise TransientFetchError(url, "timeout", f"{self._timeout_s} s spent in redirects")
        # A first hop has the whole timeout (made once); after redirects, what is left of it.
        timeout = self._client_timeout(remaining_s) if attempt.redirects else self._timeout
        host = urlsplit(current).hostname or ""
        refused = self.address_guard.check_literal(host)  # names: GuardedResolver
        if refused is not None:
            raise PrivateAddressError(url, host, refused)
        try:
            async with session.request(
                method,
                URL(current, encoded=True),
                data=attempt.body or None,
                headers=attempt.headers,
                cookies=dict(attempt.cookies) if attempt.cookies else None,
                allow_redirects=False,
                timeout=timeout,
            ) as resp:
                status = resp.status
                resp_headers = _joined_headers(resp.raw_headers)
                logger.debug("%s %s -> %d", method, current, status)
                if is_retryable_status(status):
                    retry_after_s = parse_retry_after(resp_headers.get("retry-after"), time.time())
                    raise RetryableStatus(url, status, retry_after_s)
                location = _location(resp.raw_headers) if status in REDIRECT_STATUSES else None
                target = None
                carried: Mapping[str, str] = NO_COOKIES
                if status in REDIRECT_STATUSES and location:
                    target = _resolve_location(url, current, location)
                    if self.cookies:
                        carried = _redirect_cookies(current, attempt.cookies, resp, target)
                    refusal = attempt.guard(target) if attempt.guard is not None else None
                    if refusal is None:
                        if len(attempt.redirects) >= self._max_redirects:
                            raise TooManyRedirects(url, self._max_redirects)
                        return _Hop(status, resp_headers, b"", target, cookies=carried)
                    logger.debug("not following %s -> %s: %s", current, target, refusal)
                has_body = method != "HEAD" and status not in _NO_BODY_STATUSES
                limit = attempt.truncate_body_bytes
                data = await self._read_body(resp, url, limit) if has_body else b""
                exchange = _raw_exchange(attempt, resp) if self._record_exchanges else None
                return _Hop(status, resp_headers, data, None, exchange, target, carried)
        except AddressRefused as exc:
            raise PrivateAddressError(url, exc.host, exc.range_name) from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _classify(url, current if attempt.redirects else None, exc) from exc

    async def _read_body(
        self, resp: aiohttp.ClientResponse, url: str, truncate_bytes: int | None
    ) -> bytes:
        """Read and decode the body, enforcing the cap (or truncating, when asked).

        The cap applies to the decoded body, and to the bytes received too (a stream of empty
        gzip members decodes to nothing). ``Content-Encoding`` is undone by
        `crawlq.codings.BodyDecoder`, piece by piece, so a compression bomb stops at the cap.
        """
        limit = self._max_body_bytes if truncate_bytes is None else truncate_bytes
        declared = resp.content_length
        if truncate_bytes is None and declared is not None and declared > limit:
            raise BodyTooLarge(url, limit)
        codings = resp.headers.getall("Content-Encoding", ())
        if not codings and declared is not None and declared <= limit:
            return await resp.read()  # the body is the declared length: within the cap
        try:
            decoder = BodyDecoder(parse_codings(codings))
        except UnsupportedCoding as exc:
            raise PermanentFetchError(url, "unsupported_content_coding", str(exc)) from None
        body = _CappedBody(url, limit, truncate=truncate_bytes is not None)
        received = 0
        try:
            async for data in resp.content.iter_chunked(_CHUNK_BYTES):
                if not body.extend(decoder.feed(data)):
                    break
                received += len(data)
                if received > limit and body.over():
                    break
            else:
                body.extend(decoder.finish())
        except CodingError as exc:
            raise PermanentFetchError(url, "protocol_error", str(exc)) from None
        return body.value()


class _CappedBody:
    """Decoded pieces of a body, up to ``limit`` bytes: then `BodyTooLarge`, or a cut."""

    def __init__(self, url: str, limit: int, *, truncate: bool) -> None:
        self._url = url
        self._limit = limit
        self._truncate = truncate
        self._pieces: list[bytes] = []
        self._size = 0

    def over(self) -> bool:
        """The cap is reached: True to stop reading (truncating), else `BodyTooLarge`."""
        if self._truncate:
            return True
        raise BodyTooLarge(self._url, self._limit)

    def extend(self, pieces: Iterable[bytes]) -> bool:
        """Take ``pieces``; False once the body is cut at the cap (stop reading)."""
        for piece in pieces:
            self._size += len(piece)
            if self._size > self._limit:
                self.over()
                self._pieces.append(piece[: len(piece) - (self._size - self._limit)])
                return False
            self._pieces.append(piece)
        return True

    def value(self) -> bytes:
        """The body read."""
        return b"".join(self._pieces)


def _not_followed(_url: str) -> str:
    return "not_followed"


def _redirect_cookies(
    current: str, sent: Mapping[str, str], resp: aiohttp.ClientResponse, target: str
) -> Mapping[str, str]:
    """The cookies a redirect's target gets: those of its chain that RFC 6265 sends there.

    The cookies sent with ``current`` count as host-only cookies of its host with path
    ``/`` (and ``Secure`` when it is https, so an https -> http hop drops them); the
    response's ``Set-Cookie`` headers update them (RFC 6265 §5.3: a new value replaces an
    old one, ``Max-Age=0`` or a past ``Expires`` deletes it); what is left is filtered for
    ``target`` (§5.4: domain, path, secure) and checked (`crawlq.cookies.fit_cookies`).
    A cookie that does not apply to ``target`` is not carried further down the chain
    (a chain that leaves a host and comes back relies on the worker's jar for it).
    """
    set_cookies = resp.cookies
    if not sent and not set_cookies:
        return NO_COOKIES
    here = URL(current, encoded=True)
    jar = aiohttp.CookieJar(unsafe=True, quote_cookie=False)
    if sent:
        own: SimpleCookie = SimpleCookie()
        for name, value in sent.items():
            own[name] = value
            own[name]["path"] = "/"
            own[name]["secure"] = here.scheme == "https"
        jar.update_cookies(own, here)
    jar.update_cookies(set_cookies, resp.url)
    applicable = jar.filter_cookies(URL(target, encoded=True))
    kept, dropped = fit_cookies(_pairs(applicable.items()))
    if dropped:
        logger.debug("%s: %d cookies not carried to %s (form or size)", current, dropped, target)
    return kept


def _pairs(morsels: Iterable[tuple[str, object]]) -> list[tuple[str, str]]:
    return [(name, str(getattr(m, "value", ""))) for name, m in morsels]


def _joined_headers(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """Lower-case header names and join repeated headers with ", " (RFC 9110 §5.3).

    Values are decoded from the bytes received: as UTF-8 when they are valid UTF-8, else as
    ISO-8859-1, which maps every byte to a character (RFC 9110 §5.5 calls bytes beyond ASCII
    ``obs-text``, opaque data; WHATWG Fetch reads header values byte for byte, "isomorphic
    decode"). So no value holds a lone surrogate (aiohttp's own decoding keeps undecodable
    bytes as surrogates, which no store, log or JSON encoder can write) whatever the server
    sends.
    """
    out: dict[str, str] = {}
    for name_bytes, value_bytes in raw:
        key = name_bytes.decode("latin-1").lower()
        try:
            value = value_bytes.decode("utf-8")
        except UnicodeDecodeError:
            value = value_bytes.decode("latin-1")
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def _location(raw: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The first ``Location`` header as browsers read it (`crawlq.urls.decode_location`)."""
    for name, value in raw:
        if len(name) == 8 and name.lower() == b"location":
            return decode_location(value.strip(b" \t")) or None
    return None


def _raw_exchange(attempt: _Attempt, resp: aiohttp.ClientResponse) -> RawExchange:
    """The request sent and the response head received, as `RawExchange` records them."""
    version = resp.version
    return RawExchange(
        method=attempt.method,
        request_headers=tuple(resp.request_info.headers.items()),
        request_body=attempt.body,
        http_version=f"{version.major}.{version.minor}" if version else "1.1",
        reason=resp.reason or "",
        response_headers=tuple(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in resp.raw_headers
        ),
    )


def _resolve_location(url: str, current: str, location: str) -> str:
    try:
        return normalize(location, base=current)
    except (InvalidURL, ValueError, UnicodeError) as exc:  # web input: any Location at all
        raise PermanentFetchError(url, "bad_redirect", f"{current} -> {location!r}") from exc


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def _malformed(exc: BaseException) -> bool:
    """Whether the server's bytes broke HTTP/1.1 syntax: the same bytes again next time.

    aiohttp reports a parse error of the response (a status line, header or ``Location``
    too long, garbage where a status line or chunk size belongs, a bad header) as a
    `aiohttp.ClientResponseError` caused by a `BadHttpMessage`. A body cut short by a reset
    or an early close is a payload error caused by a ``ContentLengthError`` or
    ``TransferEncodingError`` at end of stream: transient. (A body that cannot be decoded,
    such as bad gzip, is found by `crawlq.codings`, not by aiohttp.)
    """
    cause = exc.__cause__
    for _ in range(4):  # aiohttp wraps the parser's error once or twice
        if cause is None:
            return False
        if isinstance(cause, BadHttpMessage):
            return isinstance(exc, aiohttp.ClientResponseError)
        cause = cause.__cause__
    return False


def _classify(url: str, redirected_to: str | None, exc: BaseException) -> FetchError:
    """Map a network exception to a classified `FetchError` (see `Fetcher.fetch`)."""
    detail = f"{type(exc).__name__}: {exc}".rstrip(": ")[:_MAX_DETAIL_CHARS]
    if redirected_to is not None:
        detail += f" (at {redirected_to})"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return TransientFetchError(url, "timeout", f"connect: {detail}")
    if isinstance(exc, TimeoutError):  # also aiohttp.ServerTimeoutError / SocketTimeoutError
        return TransientFetchError(url, "timeout", detail)
    if isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        return PermanentFetchError(url, "invalid_url", detail)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return PermanentFetchError(url, "tls_error", detail)
    if isinstance(exc, aiohttp.ClientConnectorDNSError) or (
        isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, socket.gaierror)
    ):
        return TransientFetchError(url, "dns_error", detail)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return TransientFetchError(url, "connect_error", detail)
    if _malformed(exc):
        return PermanentFetchError(url, "protocol_error", detail)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return TransientFetchError(url, "payload_error", detail)
    if isinstance(exc, aiohttp.ClientConnectionError | OSError):
        return TransientFetchError(url, "connection_reset", detail)
    if isinstance(exc, aiohttp.ClientResponseError):
        return TransientFetchError(url, "protocol_error", detail)
    return TransientFetchError(url, "client_error", detail)
