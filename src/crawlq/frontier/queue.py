"""The work queue contract (`WorkQueue`) and the values it speaks in: counts, bounds, offers.

`WorkQueue` is the life of a request from push to settle (the states and rules of
`crawlq.frontier.contract`): push and offer, lease, renew, and the four settles (ack, retry,
dead, release), with the counts operators watch (`WorkQueue.stats`). The values are frozen,
slotted dataclasses shared by every backend and its callers. Times are Unix ms (``*_ms``);
counts are requests.

The lease wait every backend shares (`lease_with_wait`): try, and if nothing is ready, wait.
`WorkQueue.lease` returns at once with what is ready, or waits up to ``wait_s`` seconds for a
request to become ready. The waiting rule is the same for every backend; only "try once" and
"sleep until woken or timed out" differ (one SQLite transaction and an `asyncio.Event`; one
Lua call and a blocking Redis list pop). So a backend passes those two steps in, and
`lease_with_wait` decides when to try again and when to give up:

* A try returns the leases it got and the Unix ms at which the earliest not-yet-ready request
  becomes ready (a host's next-allowed time, a retry's due time, a lease's expiry), or
  ``None`` when nothing queued, delayed or leased could ever become ready ("drained").
* Leases, or ``wait_s`` used up, end the wait. So does "drained" after at least one wait (or
  at once with ``until_drained``): nothing will become ready unless someone pushes, and a
  caller waiting for a drained frontier is told so rather than held for the whole ``wait_s``.
* Otherwise sleep until the earliest ready time, the end of ``wait_s`` or ``max_sleep_s``
  (a backend whose wake-up signal can be missed re-checks at least that often), whichever
  comes first, unless woken earlier.

The ``fetched`` leases (requests done, slots to free; see `WorkQueue.lease`) go with the
first try only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from crawlq.clock import Clock
from crawlq.request import CrawlRequest, Lease
from crawlq.rules.politeness import Politeness

if TYPE_CHECKING:
    from crawlq.settings import Settings

__all__ = [
    "FRONTIER_FULL",
    "FULL_LOG_EVERY_S",
    "MAX_LEASE_BATCH",
    "FrontierStats",
    "HostBackoff",
    "HostStats",
    "Offer",
    "QueueBounds",
    "Sleep",
    "TryLease",
    "WorkQueue",
    "backoff_state",
    "check_lease_args",
    "lease_with_wait",
]

FRONTIER_FULL = "frontier_full"
"""The dead-letter reason of a request dropped because the frontier was full (drop-lowest)."""


FULL_LOG_EVERY_S = 60.0
"""Seconds between two log lines of a Redis that stays at its ``maxmemory``: the frontier's
waiting inbox entries (`crawlq.frontier.redis`), a worker's refused links
(`crawlq.engine.outage.FullFrontier`)."""


@dataclass(frozen=True, slots=True)
class HostStats:
    """One host's queue.

    Attributes:
        host: Politeness key (``host`` or ``host:port``).
        queued: Requests ready to lease once politeness allows.
        in_flight: The host's concurrency slots taken now: leases whose requests are not
            yet reported done (see `WorkQueue.lease`'s ``fetched``).
        next_at_ms: Unix ms before which no new lease starts on this host.
    """

    host: str
    queued: int
    in_flight: int
    next_at_ms: int


@dataclass(frozen=True, slots=True)
class HostBackoff:
    """A host that pushed back or failed and has not answered since.

    A strike (`crawlq.frontier.hosts.HostRules.host_strike`) made it so.

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
            URLs already (`WorkQueue.push`); counted each time one is pushed (a worker does
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
        when_full: ``"block"``: a producer's push (`WorkQueue.offer`) takes only what fits and
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

    @classmethod
    def from_settings(cls, settings: Settings) -> QueueBounds:
        """The bounds of ``settings`` (``max_queued``, ``max_queued_per_host``, ``when_full``)."""
        return cls(settings.max_queued, settings.max_queued_per_host, settings.when_full)

    @property
    def bounded(self) -> bool:
        """Whether any bound is set."""
        return self.max_queued is not None or self.max_queued_per_host is not None


@dataclass(frozen=True, slots=True)
class Offer:
    """What `WorkQueue.offer` did with a producer's requests.

    Attributes:
        queued: New requests queued.
        refused: New requests not taken for lack of room (``block``): not marked seen, so
            offering them again later queues them.
        dropped: Requests dead-lettered as `FRONTIER_FULL` (``drop-lowest``), new or queued.
    """

    queued: int
    refused: int = 0
    dropped: int = 0


def backoff_state(flags: str) -> str:
    """The `HostBackoff.state` of a host's breaker flags (``""``, ``"p"`` or ``"d"``)."""
    return {"p": "parked", "d": "down"}.get(flags, "backoff")


class WorkQueue(Protocol):
    """Requests from push to settle (`crawlq.frontier.contract` for the shared semantics)."""

    bounds: QueueBounds
    """The job's queue bounds (`QueueBounds`); unbounded by default. Given when the frontier
    is opened and not changed afterwards by crawlq (a replay held to other bounds passes them
    to `crawlq.frontier.inspection.Inspection.replay_dead`); the contract tests set it to
    build queue states."""

    politeness: Politeness
    """The job's host politeness rules (`crawlq.rules.politeness`): the default policy, and the
    per-host overrides written for each host when its first request is pushed. Given when the
    frontier is opened (a shared job's rules: `crawlq.engine.backends` opens the frontier again
    with them when they differ) and not changed afterwards."""

    round_trips: int
    """Requests this client has made to its backend so far: Redis network round trips (a
    pipeline or a script counts once), or steps on the SQLite thread. Workers report it per
    page, the figure that batching keeps low."""

    async def push(self, requests: Sequence[CrawlRequest]) -> int:
        """Queue the requests whose fingerprints were never seen (workers' discovered links).

        A ``block`` bound (`bounds`) does not apply here; ``drop-lowest`` does (`QueueBounds`).

        With a per-host page budget (``politeness.max_pages_per_host``), a host takes at most
        that many new fingerprints over the life of the job, counted in the same atomic step
        for every worker; a new request of a host at its budget is neither queued nor marked
        seen, and is counted in `FrontierStats.over_budget` (a URL pushed again is counted
        again, as scope's skipped links are).

        Args:
            requests: Any number, duplicates allowed (within the batch too).

        Returns:
            How many were new and queued.
        """
        ...

    async def offer(self, requests: Sequence[CrawlRequest]) -> Offer:
        """Push as a producer: under a ``block`` bound only the new requests that fit queue.

        Like `push`, but under a ``block`` bound (`bounds`) the new requests that do not fit
        are refused, not marked seen, so that offering them again later queues them.

        Args:
            requests: Any number, duplicates allowed (a duplicate is never refused).

        Returns:
            An `Offer`: how many were queued, refused and dropped.
        """
        ...

    async def lease(
        self,
        n: int,
        worker_id: str,
        visibility_timeout_s: float,
        wait_s: float = 0.0,
        *,
        until_drained: bool = False,
        fetched: Sequence[Lease] = (),
    ) -> list[Lease]:
        """Claim up to ``n`` ready requests for ``worker_id``.

        Returns the highest-priority requests among hosts whose politeness window is open now
        (FIFO within a priority); each host's next-allowed time and in-flight count move in the
        same atomic step. When nothing is ready, waits up to ``wait_s`` seconds, waking as soon
        as work is pushed, a host's window opens, a retry falls due or a lease expires; no busy
        polling. A wait also ends early, with an empty list, when a lease is settled and the
        frontier is left drained (nothing queued, delayed or in flight), so a worker waiting on
        its own last leases learns at once that the crawl is over. An empty list means "nothing
        ready yet", not "crawl finished" (see `stats`).

        Args:
            n: Most leases to return, 1..1000.
            worker_id: Stable id of the calling worker.
            visibility_timeout_s: Seconds before an unsettled, unrenewed lease returns to the
                queue, with its host's slot (> 0). Workers pass their heartbeat-based hold
                (`crawlq.settings.Settings.lease_hold_s`) and renew with every heartbeat, so
                a dead worker's leases return within seconds (invariant 8).
            wait_s: Longest wait in seconds when nothing is ready (0: do not wait).
            until_drained: Do not wait at all when the frontier is drained at the first look
                (for workers that stop once it is: ``--exit-when-done``). Without it a
                drained frontier is waited on, as an idle worker waits for producers.
            fetched: Leases of this worker whose requests are done on the wire (the response
                was read, or the fetch failed). Their hosts' concurrency slots are given back
                first, in the same step, so a worker need not settle a lease before its host
                can take the next request (politeness limits requests at once, not results
                waiting to be stored). The leases stay held (visibility timeout, `renew`)
                until settled; one no longer held is ignored.

        Returns:
            Up to ``n`` leases; ``attempt`` counts deliveries of that request, this one included.
        """
        ...

    async def renew(
        self, leases: Sequence[Lease], visibility_timeout_s: float, worker_id: str | None = None
    ) -> list[Lease]:
        """Push the deadlines of held leases to now + ``visibility_timeout_s``.

        Workers call it periodically even with no leases: it is also their heartbeat
        (``worker_id``), which shared backends show to operators.

        Returns:
            The renewed leases (new ``deadline_ms``); leases no longer held are left out.
        """
        ...

    async def ack(self, leases: Sequence[Lease]) -> int:
        """Mark leased requests done and free their hosts' slots.

        Returns:
            How many were still held (and are now done).
        """
        ...

    async def retry(self, lease: Lease, delay_s: float, reason: str) -> bool:
        """Return a leased request to the queue after ``delay_s`` seconds (>= 0).

        The attempt was already counted by the lease. Returns False if the lease was not held.
        """
        ...

    async def dead(self, lease: Lease, reason: str) -> bool:
        """Move a leased request to the dead-letter record with ``reason``.

        Returns False if the lease was not held.
        """
        ...

    async def release(self, leases: Sequence[Lease]) -> int:
        """Give back leases without working on them (shutdown); their attempt is not counted.

        Returns:
            How many were still held.
        """
        ...

    async def stats(self) -> FrontierStats:
        """Current counts; cheap enough to call a few times a second."""
        ...


# -- the lease wait every backend shares (module docstring) ------------------------------------

MAX_LEASE_BATCH = 1000
"""Most leases one call may ask for (``n``)."""

TryLease = Callable[[Sequence[Lease]], Awaitable[tuple[list[Lease], int | None]]]
"""One try: ``fetched`` leases in, (leases got, Unix ms of the earliest ready time or None) out."""

Sleep = Callable[[float, bool], Awaitable[None]]
"""Sleep up to ``timeout_s`` seconds or until woken; the flag says whether anything is pending
(a ready time is known), which a backend may use to choose how it waits."""


def check_lease_args(n: int, visibility_timeout_s: float) -> int:
    """Check `Frontier.lease`'s arguments and return the visibility timeout in ms.

    Raises:
        ValueError: ``n`` outside 1..`MAX_LEASE_BATCH`, or a visibility timeout that is not
            positive; the message names the argument.
    """
    if not 1 <= n <= MAX_LEASE_BATCH:
        raise ValueError(f"n must be in 1..{MAX_LEASE_BATCH}, got {n}")
    if visibility_timeout_s <= 0:
        raise ValueError(f"visibility_timeout_s must be positive, got {visibility_timeout_s}")
    return round(visibility_timeout_s * 1000)


async def lease_with_wait(
    try_lease: TryLease,
    sleep: Sleep,
    clock: Clock,
    *,
    wait_s: float,
    until_drained: bool,
    fetched: Sequence[Lease],
    max_sleep_s: float = math.inf,
) -> list[Lease]:
    """Try to lease; while nothing is ready, sleep and try again, by the rules above.

    Args:
        try_lease: The backend's one try (`TryLease`).
        sleep: The backend's wait for a wake-up (`Sleep`).
        clock: The backend's clock (Unix ms), which ready times are on.
        wait_s: Seconds to wait at most (0: try once).
        until_drained: Give up at once when the frontier is drained.
        fetched: Leases whose requests are done, passed to the first try.
        max_sleep_s: Longest single sleep, seconds.

    Returns:
        The leases got; empty when the wait ended without any.
    """
    give_up = time.monotonic() + wait_s
    waited = False
    while True:
        leases, wake_ms = await try_lease(fetched)
        fetched = ()
        remaining = give_up - time.monotonic()
        if leases or remaining <= 0 or ((waited or until_drained) and wake_ms is None):
            return leases  # wake_ms None after a wait: drained, nothing will become ready
        timeout = min(remaining, max_sleep_s)
        if wake_ms is not None:
            timeout = min(timeout, max(0.001, (wake_ms - clock.wall_ms()) / 1000))
        await sleep(timeout, wake_ms is not None)
        waited = True
