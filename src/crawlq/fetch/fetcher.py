"""`Fetcher`: one pooled aiohttp session, each fetch one time budget, redirects hop by hop.

The rules it applies are listed in `crawlq.fetch`; this module holds the session, the
request loop and the checks before each hop (the private-address guard for IP-literal
hosts, the remaining time).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from types import TracebackType
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver
from yarl import URL

from crawlq.errors import (
    ConfigError,
    InvalidURL,
    PermanentFetchError,
    PrivateAddressError,
    ProxiesBenched,
    RetryableStatus,
    TooManyRedirects,
    TransientFetchError,
)
from crawlq.fetch.auth import HostCredentials
from crawlq.fetch.connections import (
    AddressRefused,
    GuardedResolver,
    guard_target,
    proxy_failure,
    proxy_kwargs,
    proxy_status_failure,
    socks_connector,
    socks_errors,
)
from crawlq.fetch.exchange import Hop, classify, joined_headers, raw_exchange, read_body
from crawlq.fetch.jar import CookieJar, redirect_cookies
from crawlq.fetch.redirects import (
    REDIRECT_STATUSES,
    Attempt,
    RedirectGuard,
    location_of,
    not_followed,
    resolve_location,
)
from crawlq.request import FetchResult
from crawlq.rules.proxies import AllBenched, Proxy, ProxyPool, parse_proxy
from crawlq.rules.retry import is_retryable_status, parse_retry_after
from crawlq.settings import Settings
from crawlq.urls import host_name, url_keys
from crawlq.web.addresses import AddressGuard
from crawlq.web.codings import ACCEPT_ENCODING
from crawlq.web.cookies import NO_COOKIES
from crawlq.web.decode import decode_body
from crawlq.web.headers import check_headers, merge_headers, parse_header_line

__all__ = ["AUTO", "Fetcher"]

AUTO = object()
"""`Fetcher.fetch`'s ``proxy`` default: the fetcher's `ProxyPool` chooses."""

logger = logging.getLogger("crawlq.fetch")

_NO_BODY_STATUSES = frozenset({204, 304})
_NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    TimeoutError,
    aiohttp.ClientError,
    OSError,
)
"""What a fetch's network failure raises; a fetcher with a SOCKS5 session adds `socks_errors`."""
_DNS_CACHE_TTL_S = 60
_DEFAULT_HEADERS = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Accept-Language": "en",  # Scrapy's DEFAULT_REQUEST_HEADERS
    "Accept-Encoding": ACCEPT_ENCODING,
}


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
        address_guard: Which addresses may be connected to (`crawlq.web.addresses`). Default:
            the guard is on with no exempt host, so loopback, private, link-local… addresses
            are refused with `PrivateAddressError`; ``AddressGuard(allow_private=True)``
            turns it off.
        resolver: The DNS resolver that `GuardedResolver` wraps (default: aiohttp's).
        cookies: Keep a cookie jar and send the cookies a fetch is given (module docstring);
            False: no cookie is stored or sent, and ``location_cookies`` is always empty.
        default_headers: Headers sent with every request (the job's ``default_headers``,
            checked by `crawlq.web.headers`), over the built-in ``Accept``, ``Accept-Language``
            and ``Accept-Encoding``; a fetch's own ``headers`` win over them.
        credentials: The ``Authorization`` each host's requests carry (`crawlq.fetch.auth`),
            decided hop by hop by the host of the request; it wins over ``headers``.
        keep_auth: Keep the ``Authorization`` value in ``FetchResult.exchange`` (for WARC
            ``--warc-keep-auth``); by default it is recorded as ``[redacted]``. A
            ``Proxy-Authorization`` is always recorded ``[redacted]``.
        proxies: The proxies requests go through and the shared bench (`crawlq.rules.proxies`);
            None or an empty pool: direct connections only.

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
        default_headers: Mapping[str, str] | None = None,
        credentials: HostCredentials | None = None,
        keep_auth: bool = False,
        proxies: ProxyPool | None = None,
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
        self._default_headers = check_headers(default_headers or {})
        # None without any host's credentials: a hop then looks nothing up
        self._credentials = credentials if credentials is not None and credentials.hosts() else None
        self._keep_auth = keep_auth
        self._session: aiohttp.ClientSession | None = None
        self._timeout = self._client_timeout(timeout_s)
        self.proxies = proxies or ProxyPool()
        self._network_errors = _NETWORK_ERRORS
        self._jar: aiohttp.abc.AbstractCookieJar | None = None
        self._proxy_sessions: dict[str, aiohttp.ClientSession] = {}
        self._target_resolver: GuardedResolver | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, max_connections: int | None = None) -> Fetcher:
        """A fetcher with the crawl's limits; it records raw exchanges when WARC is on.

        Its private-address guard allows the job's ``seed_hosts`` (or everything with
        ``allow_private``), so both engines apply the same guard.

        Args:
            settings: User agent, timeouts, body and redirect limits, ``warc_dir``,
                ``allow_private``, ``seed_hosts``, ``cookies_enabled``, ``default_headers``,
                ``host_auth`` (its secrets read from ``os.environ``), ``warc_keep_auth``,
                ``proxies``, ``proxy_rotation``, ``proxy_trust_env``.
            max_connections: Connections at once (default: ``settings.concurrency``).

        Raises:
            ConfigError: A credential's environment variable is not set
                (`HostCredentials.from_settings`).
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
            default_headers=dict(parse_header_line(line) for line in s.default_headers),
            credentials=HostCredentials.from_settings(s),
            keep_auth=s.warc_keep_auth,
            proxies=proxy_pool(s),
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
        proxied, self._proxy_sessions = self._proxy_sessions, {}
        for one in proxied.values():
            await one.close()
        self._jar = None

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
        proxy: Proxy | object | None = AUTO,
    ) -> FetchResult:
        """Fetch ``url``, following redirects, and return the complete response.

        Args:
            url: Absolute http(s) URL (normalised here with `crawlq.urls.normalize`).
            method: HTTP method.
            body: Request body bytes.
            headers: Extra request headers; they override the defaults (``User-Agent``,
                ``Accept``, ``Accept-Encoding: gzip, deflate, br``).
            cookies: Cookies to send besides the jar's (name to value, already checked by
                `crawlq.web.cookies.check_cookies`); they win over the jar's of the same name,
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
            proxy: The proxy for this fetch and its redirects (None: a direct connection);
                by default the fetcher's `ProxyPool` chooses for the URL's host.

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
            ProxyFailed: The proxy failed, not the target (`crawlq.rules.proxies`).
            ProxiesBenched: Every proxy this fetch could take is benched; nothing was sent.
            PrivateAddressError: The host of ``url`` or of a redirect hop is (or resolves
                only to) an address the guard refuses; nothing was sent to it.
            PermanentFetchError: ``invalid_url`` (``url`` cannot be fetched),
                ``bad_redirect`` (a ``Location`` that is not http(s)), ``tls_error`` (the
                server's certificate does not verify), ``unsupported_content_coding`` (a
                ``Content-Encoding`` that `crawlq.web.codings` cannot undo: the body is not
                read) or ``protocol_error`` (a response that breaks HTTP syntax: a status
                line, header or ``Location`` over the size limit, a bad header, garbage
                after the body, a body that is not valid data of its content coding).
        """
        try:
            start_url = url_keys(url).url  # cached: the frontier normalised it already
        except InvalidURL as exc:
            raise PermanentFetchError(url, "invalid_url", exc.reason) from exc
        via = self._route(start_url) if proxy is AUTO else proxy
        assert via is None or isinstance(via, Proxy)
        session = self._session_for(via)
        start_s = time.perf_counter()
        attempt = Attempt(
            url=url,
            current=start_url,
            method=method.upper(),
            body=body,
            headers=dict(headers or {}),
            deadline_s=start_s + self._timeout_s,
            guard=redirect_guard if follow_redirects else not_followed,
            truncate_body_bytes=truncate_body_bytes,
            cookies=(cookies or NO_COOKIES) if self.cookies else NO_COOKIES,
        )
        while (hop := await self._exchange(session, attempt, via)).next_url is not None:
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

    def route(self, url: str, meta: Mapping[str, object]) -> Proxy | None:
        """The proxy a request of ``url`` with ``meta`` goes through (None: direct).

        ``meta["proxy"]``, when the key is there, names it: None or "" for a direct
        connection, else one of this fetcher's proxies (`ProxyPool.named`: meta travels
        through the frontier and is untrusted). Otherwise the pool chooses.

        Raises:
            PermanentFetchError: ``proxy_not_configured``: meta names another proxy.
            ProxiesBenched: Every proxy the request could take is benched.
        """
        if "proxy" in meta:
            try:
                return self.proxies.named(meta["proxy"])
            except ValueError as exc:
                raise PermanentFetchError(url, "proxy_not_configured", str(exc)) from None
        return self._route(url)

    def _route(self, url: str) -> Proxy | None:
        """The pool's proxy for ``url`` (None: direct)."""
        if not self.proxies.active:
            return None
        try:
            return self.proxies.choose(url, host_name(url), int(time.time() * 1000))
        except AllBenched as exc:
            raise ProxiesBenched(url, exc.until_ms) from None

    def _cookie_jar(self) -> aiohttp.abc.AbstractCookieJar:
        """One jar for every session of this fetcher (direct and proxied)."""
        if self._jar is None:
            self._jar = CookieJar() if self.cookies else aiohttp.DummyCookieJar()
        return self._jar

    def _session_for(self, proxy: Proxy | None) -> aiohttp.ClientSession:
        """The direct session, or the one that sends through ``proxy`` (module `proxied`)."""
        if proxy is None:
            return self._ensure_session()
        key = proxy.id if proxy.scheme == "socks5" else "http"
        session = self._proxy_sessions.get(key)
        if session is None:
            if proxy.scheme == "socks5":
                connector = socks_connector(proxy, self._max_connections)
                self._network_errors = (*_NETWORK_ERRORS, *socks_errors())
            else:  # its resolver resolves only proxy hosts: this process's own configuration
                connector = aiohttp.TCPConnector(
                    limit=self._max_connections, use_dns_cache=True, ttl_dns_cache=_DNS_CACHE_TTL_S
                )
            session = self._proxy_sessions[key] = self._new_session(connector)
        return session

    def _new_session(self, connector: aiohttp.BaseConnector) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=connector,
            headers=merge_headers(
                {"User-Agent": self.user_agent}, _DEFAULT_HEADERS, self._default_headers
            ),
            timeout=self._timeout,
            raise_for_status=False,
            auto_decompress=False,  # crawlq.web.codings decodes: layered codings, bounded
            cookie_jar=self._cookie_jar(),
            max_field_size=65536,  # real sites send long Set-Cookie / CSP headers
        )

    def _guarded_resolver(self) -> GuardedResolver:
        if self._target_resolver is None:
            self._target_resolver = GuardedResolver(self.address_guard, self._resolver)
        return self._target_resolver

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
            self._session = self._new_session(connector)
        return self._session

    def _client_timeout(self, total_s: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            total=total_s, connect=self._connect_timeout_s, sock_read=self._timeout_s
        )

    async def _check_proxied_target(self, url: str, current: str) -> None:
        """The private-address guard on a proxied hop's target, before anything is sent.

        A direct hop's IP literal is judged in `_exchange` and its name by `GuardedResolver`
        on connect; through a proxy, which does the connecting, the name is resolved here
        first (`guard_target`).
        """
        parts = urlsplit(current)
        host = host_name(current)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            await guard_target(self.address_guard, self._guarded_resolver, url, host, port)
        except AddressRefused as exc:
            raise PrivateAddressError(url, exc.host, exc.range_name) from None

    def _hop_headers(self, given: Mapping[str, str], current: str) -> dict[str, str]:
        """The headers of a hop to ``current``: its host's ``Authorization``, no proxy's."""
        headers = {k: v for k, v in given.items() if k.lower() != "proxy-authorization"}
        # this hop's host decides
        credential = None if self._credentials is None else self._credentials.for_url(current)
        if credential is not None:
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["Authorization"] = credential
        return headers

    async def _exchange(
        self, session: aiohttp.ClientSession, attempt: Attempt, via: Proxy | None
    ) -> Hop:
        """Send the current request of ``attempt`` (through ``via``) and read its response."""
        url, current, method = attempt.url, attempt.current, attempt.method
        remaining_s = attempt.deadline_s - time.perf_counter()
        if remaining_s <= 0:
            raise TransientFetchError(url, "timeout", f"{self._timeout_s} s spent in redirects")
        # A first hop has the whole timeout (made once); after redirects, what is left of it.
        timeout = self._client_timeout(remaining_s) if attempt.redirects else self._timeout
        host = host_name(current)
        refused = self.address_guard.check_literal(host)  # names: GuardedResolver on connect
        if refused is not None:
            raise PrivateAddressError(url, host, refused)
        if via is not None:
            await self._check_proxied_target(url, current)
        headers = self._hop_headers(attempt.headers, current)
        via_kwargs = proxy_kwargs(via, headers, current)
        try:
            async with session.request(
                method,
                URL(current, encoded=True),
                data=attempt.body or None,
                headers=headers,
                cookies=dict(attempt.cookies) if attempt.cookies else None,
                allow_redirects=False,
                timeout=timeout,
                **via_kwargs,
            ) as resp:
                status = resp.status
                resp_headers = joined_headers(resp.raw_headers)
                logger.debug("%s %s -> %d", method, current, status)
                if via is not None:
                    _raise_proxy_status(url, via, status, resp_headers)
                if is_retryable_status(status):
                    retry_after_s = parse_retry_after(resp_headers.get("retry-after"), time.time())
                    raise RetryableStatus(url, status, retry_after_s)
                location = location_of(resp.raw_headers) if status in REDIRECT_STATUSES else None
                target = None
                carried: Mapping[str, str] = NO_COOKIES
                if status in REDIRECT_STATUSES and location:
                    target = resolve_location(url, current, location)
                    if self.cookies:
                        carried = redirect_cookies(current, attempt.cookies, resp, target)
                    refusal = attempt.guard(target) if attempt.guard is not None else None
                    if refusal is None:
                        if len(attempt.redirects) >= self._max_redirects:
                            raise TooManyRedirects(url, self._max_redirects)
                        return Hop(status, resp_headers, b"", target, cookies=carried)
                    logger.debug("not following %s -> %s: %s", current, target, refusal)
                has_body = method != "HEAD" and status not in _NO_BODY_STATUSES
                limit = attempt.truncate_body_bytes
                data = await read_body(resp, url, self._max_body_bytes, limit) if has_body else b""
                exchange = (
                    raw_exchange(attempt, resp, redact=not self._keep_auth)
                    if self._record_exchanges
                    else None
                )
                return Hop(status, resp_headers, data, None, exchange, target, carried)
        except AddressRefused as exc:
            raise PrivateAddressError(url, exc.host, exc.range_name) from None
        except self._network_errors as exc:
            blamed = None if via is None else proxy_failure(url, via, exc)
            raise blamed or classify(url, current if attempt.redirects else None, exc) from exc


def _raise_proxy_status(url: str, via: Proxy, status: int, headers: dict[str, str]) -> None:
    """Raise `ProxyFailed` when a response through ``via`` is the proxy's failure."""
    failed = proxy_status_failure(url, via, status, headers)
    if failed is not None:
        raise failed


def proxy_pool(settings: Settings) -> ProxyPool:
    """The `ProxyPool` of ``settings``: ``proxies``, ``proxy_rotation``, ``proxy_trust_env``.

    Raises:
        ConfigError: A proxy URL from the environment is bad (``proxy_trust_env``).
    """
    environ = os.environ if settings.proxy_trust_env else None
    try:
        return ProxyPool(
            [parse_proxy(url) for url in settings.proxies], settings.proxy_rotation, environ
        )
    except ValueError as exc:
        raise ConfigError("proxy_trust_env", str(exc)) from None
