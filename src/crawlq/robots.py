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
  `crawlq.errors.RobotsUnreachable` (reason ``robots_unreachable``), so the engine retries the page
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
* Encoding (§2.3: UTF-8): a leading byte order mark is dropped (it would otherwise glue onto
  the first ``User-agent`` line and lose the first group); a UTF-16 BOM selects UTF-16. A
  body that is not valid UTF-8 is read as latin-1, so that no line is lost to replacement
  characters.

Sharing: with a ``shared`` store (the job's frontier, see `crawlq.frontier.base.Frontier`)
robots.txt is fetched once per origin per job, not once per worker: the record (status class,
text, fetch time and expiry) lives in the frontier, the first worker that needs a missing or
expired one claims the fetch (`RobotsStore.robots_claim`, which reads and claims in one
round trip) and stores the result, and the others wait for it and read it. Each process
keeps the records it has used in an LRU, each valid until the shared record's expiry, so
the hot path does not ask the backend per URL.
A stored record that cannot be read is treated as missing and fetched again.

Concurrent callers in one process asking about one origin share a single load (single-flight).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import secrets
import socket
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urljoin, urlsplit

from protego import Protego

from crawlq.addresses import bare_host
from crawlq.clock import Clock, SystemClock
from crawlq.errors import (
    InvalidURL,
    PermanentFetchError,
    PrivateAddressError,
    RobotsUnreachable,
    TooManyRedirects,
    TransientFetchError,
)
from crawlq.fetch import Fetcher
from crawlq.robots_record import MAX_TTL_MS, RobotsRecord
from crawlq.settings import Settings
from crawlq.urls import url_keys

__all__ = ["MAX_TTL_S", "RobotsCache", "RobotsStore", "RobotsVerdict"]

logger = logging.getLogger(__name__)

MAX_TTL_S = MAX_TTL_MS / 1000
"""RFC 9309 §2.4: do not use a cached robots.txt for more than 24 hours."""
_MAX_ROBOTS_BYTES = 500 * 1024  # §2.5: parse at least, and here at most, 500 KiB
_MAX_ROBOTS_REDIRECTS = 5  # §2.3.1.2: follow at least five consecutive redirects
CLAIM_MARGIN_S = 10.0
"""Seconds a claim on a shared robots.txt fetch outlives the fetch's own ``timeout_s``."""


class RobotsStore(Protocol):
    """Where the job's robots.txt records are shared: the frontier's three robots methods.

    `crawlq.frontier.base.Frontier` documents them; every frontier backend is one.
    """

    async def robots_get(self, origin: str) -> RobotsRecord | None:
        """The stored record of ``origin`` (expired or not), or None."""
        ...

    async def robots_claim(
        self, origin: str, holder: str, ttl_s: float, *, force: bool = False
    ) -> tuple[RobotsRecord | None, bool]:
        """The stored record, and the claim on its fetch unless it is fresh."""
        ...

    async def robots_put(self, origin: str, record: RobotsRecord) -> None:
        """Store ``origin``'s record and end the claim on it."""
        ...


@dataclass(frozen=True, slots=True)
class RobotsVerdict:
    """The answer of `RobotsCache.check` for one URL.

    Attributes:
        allowed: robots.txt lets us fetch the URL.
        fetched: This call sent the robots.txt request itself (it was missing or expired
            everywhere): the caller's politeness slot went to robots.txt, and a fresh copy
            (its ``Crawl-delay`` included) has just been stored for every worker.
        crawl_delay_s: ``Crawl-delay`` of our group at the URL's origin in seconds (a
            non-standard record, RFC 9309 §2.2.4), or None.
        loaded: robots.txt was not in this process's memory: this call waited for it (fetched
            here, by another caller, or read from the job's shared copy). A lease granted
            before then may predate the host's Crawl-delay.
        sitemaps: The file's ``Sitemap:`` URLs (a non-group record, RFC 9309 §2.2.4;
            sitemaps.org "Specifying the Sitemap location in your robots.txt file"), resolved
            against the robots.txt URL, unvalidated; given only to the call that started
            this process's load of the file (once per origin per process and TTL), else ().
    """

    allowed: bool
    fetched: bool
    crawl_delay_s: float | None
    loaded: bool = False
    sitemaps: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Entry:
    """What is known about one origin's robots.txt in this process.

    ``rules`` None with ``unreachable`` None means "unavailable": everything is allowed.
    ``unreachable`` holds the failure detail while robots.txt cannot be fetched.
    ``record`` is what it was built from (kept as the "earlier copy" of §2.4).
    """

    expires_ms: int
    record: RobotsRecord
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
        clock: Source of Unix ms for fetch times and expiries (tests pass a
            `crawlq.clock.ManualClock`); shared records compare against it.
        shared: The job's store of robots.txt records (its frontier), or None to keep them
            in this process only.
        holder: Id under which this cache claims fetches in ``shared`` (default: host, pid
            and a random part, unique per instance).
        claim_ttl_s: Seconds a claim on a fetch holds (longer than a fetch may take); a
            worker waiting for another's fetch gives up after 1.5 times this, and the page
            is retried (``robots_unreachable``).
        poll_s: Seconds between the first two reads while waiting for another worker's
            fetch; the interval doubles up to 0.5 s.

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
        clock: Clock | None = None,
        shared: RobotsStore | None = None,
        holder: str | None = None,
        claim_ttl_s: float = 40.0,
        poll_s: float = 0.02,
    ) -> None:
        token = user_agent.split("/", 1)[0].strip()
        if not token:
            raise ValueError(f"user_agent {user_agent!r} has no product token")
        if not 0 < ttl_s <= MAX_TTL_S:
            raise ValueError(f"ttl_s must be in (0, {MAX_TTL_S}], got {ttl_s}")
        if failure_ttl_s < 0 or max_origins < 1:
            raise ValueError("failure_ttl_s must be >= 0 and max_origins >= 1")
        if claim_ttl_s <= 0 or poll_s <= 0:
            raise ValueError("claim_ttl_s and poll_s must be positive")
        self.product_token = token
        self._fetcher = fetcher
        self._ttl_ms = round(ttl_s * 1000)
        self._failure_ttl_ms = round(failure_ttl_s * 1000)
        self._max_origins = max_origins
        self._clock: Clock = clock or SystemClock()
        self._shared = shared
        self._holder = holder or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._claim_ttl_s = claim_ttl_s
        self._poll_s = poll_s
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._loading: dict[str, asyncio.Future[tuple[_Entry, bool]]] = {}

    @classmethod
    def from_settings(
        cls, fetcher: Fetcher, settings: Settings, shared: RobotsStore | None
    ) -> RobotsCache:
        """One worker's cache, sharing the job's copies through ``shared`` (its frontier).

        Both engines build theirs here: robots.txt is fetched once per origin per job and
        refetched after ``settings.robots_ttl_s`` seconds (RFC 9309 §2.4).
        """
        return cls(
            fetcher,
            settings.user_agent,
            settings.robots_ttl_s,
            shared=shared,
            claim_ttl_s=settings.timeout_s + CLAIM_MARGIN_S,
            # A failure is remembered no longer than the host's first pause after it, so a
            # page that meets a remembered failure (and is given back, `engine.step`) waits
            # for the host instead of spinning through it.
            failure_ttl_s=min(5.0, settings.host_backoff_s),
        )

    async def allowed(self, url: str) -> bool:
        """Return whether robots.txt lets us fetch ``url``, fetching robots.txt if needed.

        Args:
            url: Absolute http(s) URL.

        Returns:
            True when allowed (also when robots.txt is unavailable: 3xx beyond five hops or
            4xx); False when a matching ``Disallow`` rule wins.

        Raises:
            RobotsUnreachable: ``robots_unreachable``: robots.txt answered 5xx, 408 or 429,
                or could not be fetched (module docstring explains this choice).
            PermanentFetchError: ``invalid_url``: ``url`` is not an absolute http(s) URL.
            PrivateAddressError: ``url``'s host is refused by the fetcher's private-address
                guard (a refused redirect hop of robots.txt makes it unavailable instead).
        """
        return (await self.check(url)).allowed

    async def check(self, url: str) -> RobotsVerdict:
        """Like `allowed`, and also say whether this call fetched robots.txt, and Crawl-delay.

        The hook for politeness: ``fetched`` is True once per origin per job and TTL (on the
        worker that sent the request), the moment to apply a new ``Crawl-delay``.

        Args:
            url: Absolute http(s) URL.

        Returns:
            The verdict: allowed, fetched by this call, and the origin's Crawl-delay (s).

        Raises:
            TransientFetchError: As `allowed`.
            PermanentFetchError: As `allowed`.
        """
        origin = _origin(url)
        entry, fetched, loaded, first = await self._entry(origin)
        if entry.unreachable is not None:
            raise RobotsUnreachable(url, entry.unreachable, requested=fetched)
        allowed = entry.rules is None or entry.rules.can_fetch(url, self.product_token)
        sitemaps = _sitemaps(entry, origin) if first else ()
        delay_s = _crawl_delay(entry, self.product_token)
        return RobotsVerdict(allowed, fetched, delay_s, loaded, sitemaps)

    def is_fresh(self, url: str) -> bool:
        """Return whether `allowed` can answer for ``url`` from memory, without a request.

        Args:
            url: Absolute http(s) URL.

        Raises:
            PermanentFetchError: ``invalid_url``: ``url`` is not an absolute http(s) URL.
        """
        entry = self._entries.get(_origin(url))
        return entry is not None and entry.expires_ms > self._clock.wall_ms()

    def crawl_delay_s(self, host_key: str) -> float | None:
        """Return the ``Crawl-delay`` for our group on ``host_key``, from memory only.

        ``Crawl-delay`` is a non-standard extension (RFC 9309 §2.2.4 "other records"): the
        seconds a site asks crawlers to wait between requests. Only a robots.txt already
        loaded by `allowed` or `check` (fetched here, or read from the shared copy) is
        consulted (https first, then http).

        Args:
            host_key: ``host`` or ``host:port`` as made by `crawlq.urls.host_key`.

        Returns:
            Seconds, or None when not cached, not given, or not for our group.
        """
        now = self._clock.wall_ms()
        for scheme in ("https", "http"):
            entry = self._entries.get(f"{scheme}://{host_key}")
            if entry is not None and entry.expires_ms > now:
                delay = _crawl_delay(entry, self.product_token)
                if delay is not None:
                    return delay
        return None

    async def _entry(self, origin: str) -> tuple[_Entry, bool, bool, bool]:
        """The origin's entry, and whether this caller fetched, waited, started the load.

        Waited: the entry was not in memory, so this caller waited for a load. Started: it
        is the caller that began that load (the others waited for the same one).
        """
        entry = self._entries.get(origin)
        if entry is not None and entry.expires_ms > self._clock.wall_ms():
            self._entries.move_to_end(origin)
            return entry, False, False, False
        loading = self._loading.get(origin)
        first = loading is None
        if loading is None:
            loading = asyncio.ensure_future(self._load(origin, entry))
            self._loading[origin] = loading
            loading.add_done_callback(lambda _: self._loading.pop(origin, None))
        # shield: one cancelled caller must not cancel the fetch the others wait for
        got, fetched = await asyncio.shield(loading)
        return got, fetched and first, True, first  # only the first's slot went to robots.txt

    async def _load(self, origin: str, previous: _Entry | None) -> tuple[_Entry, bool]:
        earlier = None if previous is None else previous.record
        if self._shared is None:
            record, fetched = await self._fetch(origin, earlier), True
        else:
            record, fetched = await self._load_shared(self._shared, origin, earlier)
        entry = self._remember(origin, record)
        return entry, fetched

    async def _load_shared(
        self, shared: RobotsStore, origin: str, earlier: RobotsRecord | None
    ) -> tuple[RobotsRecord, bool]:
        """Read the job's record; if missing or expired, fetch it or wait for whoever does.

        One round trip when the record is fresh or this worker gets the claim.
        """
        waited_s = 0.0
        pause_s = self._poll_s
        while True:
            record, claimed = await shared.robots_claim(origin, self._holder, self._claim_ttl_s)
            if record is not None and record.status != "unreachable":
                earlier = record  # §2.4: the last good copy, kept while unreachable
            if claimed:
                fresh = await self._fetch(origin, earlier)
                await shared.robots_put(origin, fresh)
                return fresh, True
            now = self._clock.wall_ms()
            if record is not None and record.fresh_at(now):
                return record, False
            if waited_s >= 1.5 * self._claim_ttl_s:
                detail = f"another worker's fetch of robots.txt took over {waited_s:.0f} s"
                return RobotsRecord("unreachable", now, now, detail=detail), False
            await asyncio.sleep(pause_s)  # another worker is fetching it
            waited_s += pause_s
            pause_s = min(2 * pause_s, 0.5)

    def _remember(self, origin: str, record: RobotsRecord) -> _Entry:
        if record.status == "parsed":
            entry = _Entry(record.expires_at_ms, record, rules=Protego.parse(record.body))
        elif record.status == "unavailable":
            entry = _Entry(record.expires_at_ms, record)
        else:
            entry = _Entry(record.expires_at_ms, record, unreachable=record.detail or "unreachable")
        self._entries[origin] = entry
        self._entries.move_to_end(origin)
        while len(self._entries) > self._max_origins:
            self._entries.popitem(last=False)
        return entry

    async def _fetch(self, origin: str, earlier: RobotsRecord | None) -> RobotsRecord:
        robots_url = f"{origin}/robots.txt"
        hops = 0

        def guard(_next_url: str) -> str | None:
            nonlocal hops
            hops += 1
            return "robots_redirect_limit" if hops > _MAX_ROBOTS_REDIRECTS else None

        now = self._clock.wall_ms()
        expires = now + self._ttl_ms
        try:
            result = await self._fetcher.fetch(
                robots_url, redirect_guard=guard, truncate_body_bytes=_MAX_ROBOTS_BYTES
            )
        except TooManyRedirects:  # §2.3.1.2: unavailable
            return RobotsRecord("unavailable", now, expires, detail="too many redirects")
        except PrivateAddressError as exc:
            if bare_host(exc.host) == bare_host(urlsplit(robots_url).hostname or ""):
                raise  # the page's host itself is refused: `check` raises it for the page
            detail = "a redirect to a refused private address"
            return RobotsRecord("unavailable", now, expires, detail=detail)
        except PermanentFetchError as exc:
            if exc.reason == "bad_redirect":  # a redirect we cannot follow: unavailable
                return RobotsRecord("unavailable", now, expires, detail=str(exc))
            return self._unreachable(robots_url, str(exc), earlier, now)
        except TransientFetchError as exc:  # includes RetryableStatus (5xx, 408, 429)
            return self._unreachable(robots_url, str(exc), earlier, now)
        if 200 <= result.status < 300:  # §2.3.1.1
            return RobotsRecord("parsed", now, expires, body=_robots_text(result.body))
        logger.debug("%s: status %d, robots.txt unavailable", robots_url, result.status)
        # 3xx not followed (§2.3.1.2), 4xx (§2.3.1.3)
        return RobotsRecord("unavailable", now, expires, detail=f"status {result.status}")

    def _unreachable(
        self, robots_url: str, detail: str, earlier: RobotsRecord | None, now: int
    ) -> RobotsRecord:
        expires = now + self._failure_ttl_ms
        if earlier is not None and earlier.status != "unreachable":
            logger.warning("%s unreachable, keeping the cached copy: %s", robots_url, detail)
            return RobotsRecord(  # §2.4: the earlier copy, until the next try
                earlier.status, now, expires, body=earlier.body, detail=f"unreachable: {detail}"
            )
        logger.warning("%s unreachable: %s", robots_url, detail)
        return RobotsRecord("unreachable", now, expires, detail=detail)


def _crawl_delay(entry: _Entry, token: str) -> float | None:
    if entry.rules is None:
        return None
    delay = entry.rules.crawl_delay(token)
    return None if delay is None else float(delay)


def _sitemaps(entry: _Entry, origin: str) -> tuple[str, ...]:
    if entry.rules is None:
        return ()
    robots_url = f"{origin}/robots.txt"
    found: list[str] = []
    for line in entry.rules.sitemaps:
        with contextlib.suppress(ValueError):  # web input: "http://[bad" and the like
            if line.strip():
                found.append(urljoin(robots_url, line.strip()))
    return tuple(found)


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
    """Decode robots.txt (RFC 9309 §2.3: UTF-8), dropping a line cut by the size limit (§2.5).

    A UTF-8 byte order mark is dropped; a UTF-16 one selects UTF-16. A body that is not
    valid UTF-8 is decoded as latin-1, which keeps every line (the rules' ASCII is the same).
    """
    cut = len(body) >= _MAX_ROBOTS_BYTES
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = body[: len(body) // 2 * 2].decode("utf-16", errors="replace")
        return text[: text.rfind("\n") + 1] if cut else text
    body = body.removeprefix(codecs.BOM_UTF8)
    if cut:
        body = body[: body.rfind(b"\n") + 1]
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("latin-1")
