"""The values the frontier contract speaks in: counts, bounds, one URL's state, dead letters.

Frozen, slotted dataclasses and a few pure helpers, shared by every backend and by the
callers of `crawlq.frontier.base.Frontier`. Times are Unix ms
(``*_ms``); counts are requests.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from crawlq.request import CrawlRequest
from crawlq.urls import split_host

__all__ = [
    "EVERY_DEAD",
    "FRONTIER_FULL",
    "FULL_LOG_EVERY_S",
    "DeadFilter",
    "DeadLetter",
    "FrontierStats",
    "HostBackoff",
    "HostStats",
    "Offer",
    "QueueBounds",
    "Replay",
    "StateName",
    "UrlState",
    "backoff_state",
    "host_matches",
]

FRONTIER_FULL = "frontier_full"
"""The dead-letter reason of a request dropped because the frontier was full (drop-lowest)."""

FULL_LOG_EVERY_S = 60.0
"""Seconds between two log lines of a Redis that stays at its ``maxmemory``: the frontier's
waiting inbox entries (`crawlq.frontier.redis`), a worker's refused links
(`crawlq.engine.outage.FullFrontier`)."""

StateName = Literal["queued", "in_flight", "delayed", "done", "dead", "unseen"]
"""Where a fingerprint is in the frontier (`UrlState.state`)."""


@dataclass(frozen=True, slots=True)
class HostStats:
    """One host's queue.

    Attributes:
        host: Politeness key (``host`` or ``host:port``).
        queued: Requests ready to lease once politeness allows.
        in_flight: The host's concurrency slots taken now: leases whose requests are not
            yet reported done (see `Frontier.lease`'s ``fetched``).
        next_at_ms: Unix ms before which no new lease starts on this host.
    """

    host: str
    queued: int
    in_flight: int
    next_at_ms: int


@dataclass(frozen=True, slots=True)
class HostBackoff:
    """A host that pushed back or failed (`Frontier.host_strike`) and has not answered since.

    Attributes:
        host: Politeness key.
        pushbacks: 429/503 answers in a row.
        failures: Connection failures in a row.
        state: ``backoff`` (paused), ``parked`` (its circuit breaker is open: probed one
            request at a time) or ``down`` (its URLs are dead-lettered as ``host_unreachable``).
        next_at_ms: Unix ms before which no new request starts on the host.
    """

    host: str
    pushbacks: int
    failures: int
    state: str
    next_at_ms: int


@dataclass(frozen=True, slots=True)
class FrontierStats:
    """Counts over the whole crawl: what operators watch for backpressure.

    Attributes:
        queued: Waiting for a lease.
        in_flight: Leased now.
        delayed: Waiting for a retry's due time.
        done: Acked.
        dead: Dead-lettered.
        seen: Distinct fingerprints ever pushed (= the sum of the five above).
        over_budget: New URLs not queued because their host had ``max_pages_per_host``
            URLs already (`Frontier.push`); counted each time one is pushed (a worker does
            not push again a link it remembers pushing, so mostly once per worker).
        hosts: The busiest hosts by queue length (at most 20).
        backoff: Hosts in backoff (at most 20), the latest next-allowed time first.
        frontier_full: Links not followed because Redis was at its ``maxmemory``, as the
            job counts them (the Celery engine's; a native worker counts its own in its
            summary's links not followed, so 0 here).
    """

    queued: int
    in_flight: int
    delayed: int
    done: int
    dead: int
    seen: int
    over_budget: int = 0
    hosts: tuple[HostStats, ...] = field(default=())
    backoff: tuple[HostBackoff, ...] = field(default=())
    frontier_full: int = 0

    @property
    def pending(self) -> int:
        """Requests not settled yet: queued + delayed + in flight. Zero means the crawl is done."""
        return self.queued + self.delayed + self.in_flight


@dataclass(frozen=True, slots=True)
class QueueBounds:
    """How many requests a job's frontier may hold queued, and what happens at the bound.

    Queued means waiting for a lease (not in flight, not delayed). The bounds keep a fast
    producer from running the backend (Redis) out of memory.

    Attributes:
        max_queued: Most requests queued in the job, or None for no bound.
        max_queued_per_host: Most requests queued for one host, or None for no bound.
        when_full: ``"block"``: a producer's push (`Frontier.offer`) takes only what fits and
            the producer waits for room; links that workers push are queued anyway (workers
            are the ones who make room: blocking them would stall the crawl), and inbox
            entries stay in the inbox until there is room. ``"drop-lowest"``: every push
            (producers and workers) queues the new request and dead-letters, with reason
            `FRONTIER_FULL`, the lowest-priority request of the same host's queue (the newest
            of equal priority), which may be the new request itself; nothing is silently lost,
            and ``--retry-dead`` / dead-letter replay requeues the dropped ones later.
    """

    max_queued: int | None = None
    max_queued_per_host: int | None = None
    when_full: str = "block"

    def __post_init__(self) -> None:
        if self.when_full not in ("block", "drop-lowest"):
            raise ValueError(f"when_full must be block or drop-lowest, got {self.when_full!r}")
        for name in ("max_queued", "max_queued_per_host"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")

    @property
    def bounded(self) -> bool:
        """Whether any bound is set."""
        return self.max_queued is not None or self.max_queued_per_host is not None


@dataclass(frozen=True, slots=True)
class Offer:
    """What `Frontier.offer` did with a producer's requests.

    Attributes:
        queued: New requests queued.
        refused: New requests not taken for lack of room (``block``): not marked seen, so
            offering them again later queues them.
        dropped: Requests dead-lettered as `FRONTIER_FULL` (``drop-lowest``), new or queued.
    """

    queued: int
    refused: int = 0
    dropped: int = 0


@dataclass(slots=True)
class Replay:
    """What `Frontier.replay_dead` did with the dead letters it was given.

    Attributes:
        queued: Dead letters put back in their host queues.
        by_reason: Of those, how many per dead-letter reason (the one they had).
        refused: Admitted dead letters left dead as they were for lack of room (a ``block``
            `QueueBounds`): replaying them again once there is room requeues them.
        dropped: Requests dead-lettered as `FRONTIER_FULL` at a ``drop-lowest`` bound:
            admitted dead letters that stayed dead (their reason is now ``frontier_full``)
            and queued requests that a replayed one outranked.
    """

    queued: int = 0
    by_reason: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    dropped: int = 0

    def add(self, other: Replay) -> None:
        """Add the counts of ``other`` (a later chunk or round) to these."""
        self.queued += other.queued
        self.by_reason.update(other.by_reason)
        self.refused += other.refused
        self.dropped += other.dropped


@dataclass(frozen=True, slots=True)
class UrlState:
    """One fingerprint's state in the frontier, as `Frontier.inspect` reads it.

    Attributes:
        fingerprint: The 20-byte request fingerprint.
        state: ``queued`` (waiting for a lease), ``in_flight`` (leased), ``delayed``
            (waiting for a retry's due time), ``done`` (acked: its outcome is in the store, a
            page or a filtered record), ``dead`` (dead-lettered) or ``unseen`` (never pushed).
        exact: False when the frontier dedups with a Bloom filter and the state is ``done``
            only because the filter says the fingerprint was seen (a false positive is
            possible at the filter's rate); True otherwise.
        request: The request as queued (URL, priority, depth, referrer), when the frontier
            still holds it: queued, in flight, delayed and dead (a done request is dropped).
        attempts: Deliveries so far (leases, this one included when in flight); None when
            not known (done, unseen).
        ready_at_ms: Queued: the Unix ms before which its host starts no request (its
            politeness window, backoff included). Delayed: the retry's due time. Else None.
        worker_id: In flight: the worker that holds the lease.
        deadline_ms: In flight: the lease's deadline (Unix ms), renewed by the worker's
            heartbeats.
        reason: Queued, in flight or delayed after a failure: the last retry's reason code
            (``timeout``, ``http_503``...). Dead: the dead-letter reason. Else None.
        dead_at_ms: Dead: when it was dead-lettered (Unix ms); None when unknown (a dead
            letter written before crawlq recorded the time).
    """

    fingerprint: bytes
    state: StateName
    exact: bool = True
    request: CrawlRequest | None = None
    attempts: int | None = None
    ready_at_ms: int | None = None
    worker_id: str | None = None
    deadline_ms: int | None = None
    reason: str | None = None
    dead_at_ms: int | None = None


def host_matches(host: str, wanted: str) -> bool:
    """Whether politeness key ``host`` is the host ``wanted`` names (`DeadFilter.host`).

    ``wanted`` is a politeness key (``example.com``, ``127.0.0.1:8080``, ``[::1]:8080``):
    it matches that key, and a key without a port also matches the host on any port.
    Hosts are compared in one written form (`crawlq.urls.split_host`: any case, an IP
    literal in any notation, an IPv6 address with or without brackets).
    """
    if host == wanted:
        return True
    wanted_host, wanted_port = split_host(wanted)
    host_name, port = split_host(host)
    return host_name == wanted_host and (not wanted_port or port == wanted_port)


@dataclass(frozen=True, slots=True)
class DeadFilter:
    """Which dead letters `Frontier.dead_letters` and `Frontier.replay_dead` act on.

    Every criterion given must hold; the default matches every dead letter.

    Attributes:
        reason: The dead-letter reason, exactly (``http_503``, ``connect_error``...).
        host: A politeness key (see `host_matches`).
        since_ms: Dead-lettered at or after this Unix ms (a dead letter whose time is not
            known never matches).
    """

    reason: str | None = None
    host: str | None = None
    since_ms: int | None = None

    def matches(self, host: str, reason: str, dead_at_ms: int | None) -> bool:
        """Whether a dead letter of ``host`` with ``reason``, dead since ``dead_at_ms``, matches."""
        if self.reason is not None and reason != self.reason:
            return False
        if self.host is not None and not host_matches(host, self.host):
            return False
        return self.since_ms is None or (dead_at_ms is not None and dead_at_ms >= self.since_ms)


EVERY_DEAD = DeadFilter()
"""The filter that matches every dead letter."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead-lettered request, as `Frontier.dead_letters` streams it.

    Attributes:
        request: The request (its ``referrer`` names the page that linked to it).
        reason: The dead-letter reason code.
        attempts: Deliveries it had (None when not known).
        dead_at_ms: When it was dead-lettered, Unix ms (None when not known).
    """

    request: CrawlRequest
    reason: str
    attempts: int | None
    dead_at_ms: int | None


def backoff_state(flags: str) -> str:
    """The `HostBackoff.state` of a host's breaker flags (``""``, ``"p"`` or ``"d"``)."""
    return {"p": "parked", "d": "down"}.get(flags, "backoff")
