"""robots.txt rules per origin, fetched through `crawlq.fetch.Fetcher` and parsed with protego.

The Robots Exclusion Protocol is RFC 9309; each rule below cites its section.

* Where (§2.3): ``scheme://host[:port]/robots.txt`` governs URLs of that scheme, host and
  port only; the cache is keyed the same way.
* Which group (§2.2.1): the product token of our ``User-Agent`` (the part before ``/``),
  matched case-insensitively; otherwise the ``*`` group.
* Status codes: 2xx is parsed (§2.3.1.1). Redirects are followed up to five hops
  (§2.3.1.2); more, or a redirect that cannot be followed, counts as "unavailable". 4xx is
  "unavailable" and allows everything (§2.3.1.3).
* Unreachable (§2.3.1.4: 5xx, 408/429, network failure): the RFC tells the crawler to
  assume a complete disallow. **crawlq deviates on purpose**: `RobotsCache.allowed` raises
  `TransientFetchError` with reason ``robots_unreachable``, so the engine retries the page
  with backoff and, after ``max_retries``, dead-letters it with that reason. The page is
  never fetched without rules, and a server outage does not turn into thousands of
  "disallowed" records. The failure is cached for ``failure_ttl_s`` only (a few seconds),
  so a burst of pages for one dead host costs one robots.txt request, and the next burst
  tries again. When an earlier copy was fetched successfully it is kept in use instead
  (§2.4 allows a cached copy past its lifetime while robots.txt is unreachable).
* Caching (§2.4): a fetched copy is used for ``ttl_s`` seconds, at most 24 hours.
* Private addresses: when the fetcher's guard refuses the host itself, `allowed` raises
  its `PrivateAddressError` (nothing is cached: no request was sent), so the page is
  filtered as ``private_address``; a refused redirect hop makes robots.txt unavailable.
* Size (§2.5): only the first 500 KiB are parsed; a last line cut in half is dropped.
* ``Crawl-delay`` is not part of RFC 9309; it is one of the "other records" that §2.2.4
  lets crawlers interpret. `RobotsCache.crawl_delay_s` exposes it as such.

Concurrent callers asking about one origin share a single robots.txt fetch (single-flight).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from protego import Protego

from crawlq.addresses import bare_host
from crawlq.errors import (
    InvalidURL,
    PermanentFetchError,
    PrivateAddressError,
    TooManyRedirects,
    TransientFetchError,
)
from crawlq.fetch import Fetcher
from crawlq.urls import url_keys

__all__ = ["MAX_TTL_S", "RobotsCache"]

logger = logging.getLogger(__name__)

MAX_TTL_S = 24 * 3600.0
"""RFC 9309 §2.4: do not use a cached robots.txt for more than 24 hours."""
_MAX_ROBOTS_BYTES = 500 * 1024  # §2.5: parse at least, and here at most, 500 KiB
_MAX_ROBOTS_REDIRECTS = 5  # §2.3.1.2: follow at least five consecutive redirects


@dataclass(frozen=True, slots=True)
class _Entry:
    """What is known about one origin's robots.txt.

    ``rules`` None with ``unreachable`` None means "unavailable": everything is allowed.
    ``unreachable`` holds the failure detail while robots.txt cannot be fetched.
    """

    expires_s: float
    rules: Protego | None = None
    unreachable: str | None = None


class RobotsCache:
    """Answers "may we fetch this URL?" from each origin's robots.txt (rules: module docstring).

    Args:
        fetcher: Fetches robots.txt files; its timeouts and body cap apply.
        user_agent: Our ``User-Agent``; its product token (before ``/``) selects the group.
        ttl_s: Seconds a fetched robots.txt (or a 4xx "unavailable" answer) is reused; at
            most 86400 (RFC 9309 §2.4).
        failure_ttl_s: Seconds an unreachable robots.txt is remembered before the next try.
        max_origins: Origins kept in memory; the least recently used is dropped beyond it.
        clock: Monotonic time source in seconds (tests pass a fake one).

    Raises:
        ValueError: ``user_agent`` has no product token, or a TTL is out of range.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        user_agent: str,
        ttl_s: float = MAX_TTL_S,
        *,
        failure_ttl_s: float = 5.0,
        max_origins: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        token = user_agent.split("/", 1)[0].strip()
        if not token:
            raise ValueError(f"user_agent {user_agent!r} has no product token")
        if not 0 < ttl_s <= MAX_TTL_S:
            raise ValueError(f"ttl_s must be in (0, {MAX_TTL_S}], got {ttl_s}")
        if failure_ttl_s < 0 or max_origins < 1:
            raise ValueError("failure_ttl_s must be >= 0 and max_origins >= 1")
        self.product_token = token
        self._fetcher = fetcher
        self._ttl_s = ttl_s
        self._failure_ttl_s = failure_ttl_s
        self._max_origins = max_origins
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._loading: dict[str, asyncio.Future[_Entry]] = {}

    async def allowed(self, url: str) -> bool:
        """Return whether robots.txt lets us fetch ``url``, fetching robots.txt if needed.

        Args:
            url: Absolute http(s) URL.

        Returns:
            True when allowed (also when robots.txt is unavailable: 3xx beyond five hops or
            4xx); False when a matching ``Disallow`` rule wins.

        Raises:
            TransientFetchError: ``robots_unreachable``: robots.txt answered 5xx, 408 or 429,
                or could not be fetched (module docstring explains this choice).
            PermanentFetchError: ``invalid_url``: ``url`` is not an absolute http(s) URL.
            PrivateAddressError: ``url``'s host is refused by the fetcher's private-address
                guard (a refused redirect hop of robots.txt makes it unavailable instead).
        """
        origin = _origin(url)
        entry = await self._entry(origin)
        if entry.unreachable is not None:
            raise TransientFetchError(url, "robots_unreachable", entry.unreachable)
        return entry.rules is None or entry.rules.can_fetch(url, self.product_token)

    def is_fresh(self, url: str) -> bool:
        """Return whether `allowed` can answer for ``url`` from the cache, without a request.

        Args:
            url: Absolute http(s) URL.

        Raises:
            PermanentFetchError: ``invalid_url``: ``url`` is not an absolute http(s) URL.
        """
        entry = self._entries.get(_origin(url))
        return entry is not None and entry.expires_s > self._clock()

    def crawl_delay_s(self, host_key: str) -> float | None:
        """Return the ``Crawl-delay`` for our group on ``host_key``, from cache only.

        ``Crawl-delay`` is a non-standard extension (RFC 9309 §2.2.4 "other records"): the
        seconds a site asks crawlers to wait between requests. Only a robots.txt already
        fetched by `allowed` is consulted (https first, then http).

        Args:
            host_key: ``host`` or ``host:port`` as made by `crawlq.urls.host_key`.

        Returns:
            Seconds, or None when not cached, not given, or not for our group.
        """
        now = self._clock()
        for scheme in ("https", "http"):
            entry = self._entries.get(f"{scheme}://{host_key}")
            if entry is not None and entry.rules is not None and entry.expires_s > now:
                delay = entry.rules.crawl_delay(self.product_token)
                if delay is not None:
                    return float(delay)
        return None

    async def _entry(self, origin: str) -> _Entry:
        entry = self._entries.get(origin)
        if entry is not None and entry.expires_s > self._clock():
            self._entries.move_to_end(origin)
            return entry
        loading = self._loading.get(origin)
        if loading is None:
            loading = asyncio.ensure_future(self._load(origin, entry))
            self._loading[origin] = loading
            loading.add_done_callback(lambda _: self._loading.pop(origin, None))
        # shield: one cancelled caller must not cancel the fetch the others wait for
        return await asyncio.shield(loading)

    async def _load(self, origin: str, previous: _Entry | None) -> _Entry:
        entry = await self._fetch(origin, previous)
        self._entries[origin] = entry
        self._entries.move_to_end(origin)
        while len(self._entries) > self._max_origins:
            self._entries.popitem(last=False)
        return entry

    async def _fetch(self, origin: str, previous: _Entry | None) -> _Entry:
        robots_url = f"{origin}/robots.txt"
        hops = 0

        def guard(_next_url: str) -> str | None:
            nonlocal hops
            hops += 1
            return "robots_redirect_limit" if hops > _MAX_ROBOTS_REDIRECTS else None

        now = self._clock()
        try:
            result = await self._fetcher.fetch(
                robots_url, redirect_guard=guard, truncate_body_bytes=_MAX_ROBOTS_BYTES
            )
        except TooManyRedirects:
            return _Entry(now + self._ttl_s)  # §2.3.1.2: unavailable
        except PrivateAddressError as exc:
            if bare_host(exc.host) == bare_host(urlsplit(robots_url).hostname or ""):
                raise  # the page's host itself is refused: `allowed` raises it for the page
            return _Entry(now + self._ttl_s)  # a redirect hop refused: cannot follow it
        except PermanentFetchError as exc:
            if exc.reason == "bad_redirect":
                return _Entry(now + self._ttl_s)  # a redirect we cannot follow: unavailable
            return self._unreachable(robots_url, str(exc), previous, now)
        except TransientFetchError as exc:  # includes RetryableStatus (5xx, 408, 429)
            return self._unreachable(robots_url, str(exc), previous, now)
        if 200 <= result.status < 300:  # §2.3.1.1
            return _Entry(now + self._ttl_s, rules=Protego.parse(_robots_text(result.body)))
        logger.debug("%s: status %d, robots.txt unavailable", robots_url, result.status)
        return _Entry(now + self._ttl_s)  # 3xx not followed (§2.3.1.2), 4xx (§2.3.1.3)

    def _unreachable(
        self, robots_url: str, detail: str, previous: _Entry | None, now: float
    ) -> _Entry:
        expires_s = now + self._failure_ttl_s
        if previous is not None and previous.unreachable is None:
            logger.warning("%s unreachable, keeping the cached copy: %s", robots_url, detail)
            return _Entry(expires_s, rules=previous.rules)  # §2.4
        logger.warning("%s unreachable: %s", robots_url, detail)
        return _Entry(expires_s, unreachable=detail)


def _origin(url: str) -> str:
    """Return ``scheme://host[:port]`` of ``url`` (default port left out).

    Raises:
        PermanentFetchError: ``invalid_url``: not an absolute http(s) URL.
    """
    scheme = url.partition(":")[0].strip().lower()
    if scheme not in ("http", "https"):
        raise PermanentFetchError(url, "invalid_url", "not an http(s) URL")
    try:
        return f"{scheme}://{url_keys(url).host}"  # cached for request URLs
    except InvalidURL as exc:
        raise PermanentFetchError(url, "invalid_url", exc.reason) from exc


def _robots_text(body: bytes) -> str:
    """Decode robots.txt as UTF-8 (RFC 9309 §2.3), dropping a line cut by the size limit."""
    if len(body) >= _MAX_ROBOTS_BYTES:
        cut = body.rfind(b"\n")
        body = body[: cut + 1] if cut >= 0 else b""
    return body.decode("utf-8", errors="replace")
