"""The per-process robots.txt cache: which origins are known, single-flight loads, verdicts.

`RobotsCache` answers "may we fetch this URL?" for the engines (rules: `crawlq.robots`). It
keeps the records it has used in an LRU of origins (``scheme://host[:port]``), each valid
until its expiry (Unix ms from the injected clock), so the hot path does not ask the backend
per URL; concurrent callers in one process asking about one origin share a single load. A
load reads the job's shared record (`load_shared`) or, with no shared store, fetches
(`crawlq.robots.file.fetch_record`).

The shared store is the job's frontier, through its robots.txt part
(`crawlq.frontier.robots.SharedRobots`): robots.txt is fetched once per origin per job, not
once per worker. The record (status class, text, fetch time and expiry,
`crawlq.frontier.robots.RobotsRecord`) lives in the frontier, the first worker that needs a
missing or expired one claims the fetch (``robots_claim``, which reads and claims in one round
trip) and stores the result, and the others wait for it and read it (`load_shared`). Times are
Unix ms from the caller's clock; waits are in seconds.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from protego import Protego

from crawlq.clock import Clock, SystemClock
from crawlq.errors import InvalidURL, PermanentFetchError, RobotsUnreachable
from crawlq.fetch import Fetcher
from crawlq.frontier.robots import MAX_TTL_MS, RobotsRecord, SharedRobots
from crawlq.robots.file import crawl_delay_s, fetch_record, sitemaps
from crawlq.settings import Settings
from crawlq.urls import url_keys

__all__ = ["CLAIM_MARGIN_S", "MAX_TTL_S", "RobotsCache", "RobotsVerdict"]

MAX_TTL_S = MAX_TTL_MS / 1000
"""RFC 9309 §2.4: do not use a cached robots.txt for more than 24 hours."""
CLAIM_MARGIN_S = 10.0
"""Seconds a claim on a shared robots.txt fetch outlives the fetch's own ``timeout_s``."""


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
    ``crawl_delay_s`` is our group's ``Crawl-delay``, read once when the file is loaded.
    """

    expires_ms: int
    record: RobotsRecord
    rules: Protego | None = None
    unreachable: str | None = None
    crawl_delay_s: float | None = None


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
        shared: SharedRobots | None = None,
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
        cls, fetcher: Fetcher, settings: Settings, shared: SharedRobots | None
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
        listed = sitemaps(entry.rules, origin) if first else ()
        return RobotsVerdict(allowed, fetched, entry.crawl_delay_s, loaded, listed)

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
            if entry is not None and entry.expires_ms > now and entry.crawl_delay_s is not None:
                return entry.crawl_delay_s
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
            record, fetched = await load_shared(
                self._shared,
                origin,
                earlier,
                lambda last: self._fetch(origin, last),
                holder=self._holder,
                claim_ttl_s=self._claim_ttl_s,
                poll_s=self._poll_s,
                clock=self._clock,
            )
        entry = self._remember(origin, record)
        return entry, fetched

    def _remember(self, origin: str, record: RobotsRecord) -> _Entry:
        if record.status == "parsed":
            rules = Protego.parse(record.body)
            delay_s = crawl_delay_s(rules, self.product_token)
            entry = _Entry(record.expires_at_ms, record, rules=rules, crawl_delay_s=delay_s)
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
        return await fetch_record(
            self._fetcher,
            origin,
            earlier,
            now_ms=self._clock.wall_ms(),
            ttl_ms=self._ttl_ms,
            failure_ttl_ms=self._failure_ttl_ms,
        )


async def load_shared(
    shared: SharedRobots,
    origin: str,
    earlier: RobotsRecord | None,
    fetch: Callable[[RobotsRecord | None], Awaitable[RobotsRecord]],
    *,
    holder: str,
    claim_ttl_s: float,
    poll_s: float,
    clock: Clock,
) -> tuple[RobotsRecord, bool]:
    """Read the job's record; if missing or expired, fetch it or wait for whoever does.

    One round trip when the record is fresh or this worker gets the claim.

    Args:
        shared: The job's store.
        origin: ``scheme://host[:port]``.
        earlier: This process's last copy, if any (RFC 9309 §2.4: kept while unreachable).
        fetch: Fetches robots.txt given the last good copy, and returns the new record.
        holder: Id under which this worker claims the fetch.
        claim_ttl_s: Seconds a claim holds; a waiter gives up after 1.5 times this and gets
            an ``unreachable`` record.
        poll_s: Seconds between the first two reads while waiting; doubles up to 0.5 s.
        clock: Source of Unix ms.

    Returns:
        The record, and whether this call fetched it.
    """
    waited_s = 0.0
    pause_s = poll_s
    while True:
        record, claimed = await shared.robots_claim(origin, holder, claim_ttl_s)
        if record is not None and record.status != "unreachable":
            earlier = record  # §2.4: the last good copy, kept while unreachable
        if claimed:
            fresh = await fetch(earlier)
            await shared.robots_put(origin, fresh)
            return fresh, True
        now = clock.wall_ms()
        if record is not None and record.fresh_at(now):
            return record, False
        if waited_s >= 1.5 * claim_ttl_s:
            detail = f"another worker's fetch of robots.txt took over {waited_s:.0f} s"
            return RobotsRecord("unreachable", now, now, detail=detail), False
        await asyncio.sleep(pause_s)  # another worker is fetching it
        waited_s += pause_s
        pause_s = min(2 * pause_s, 0.5)


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
