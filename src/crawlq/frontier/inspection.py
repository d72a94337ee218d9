"""The inspection contract (`Inspection`): one URL's state, the dead letters, their replay.

`Inspection.inspect` reads where one fingerprint is (`UrlState`); `Inspection.dead_letters`
streams the dead letters a `DeadFilter` matches; `Inspection.replay_dead` puts them back in
their host queues (`Replay` says what it did). ``crawlq inspect`` and ``crawlq dead`` are
their callers. Times are Unix ms (``*_ms``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from crawlq.frontier.queue import QueueBounds
from crawlq.request import CrawlRequest
from crawlq.urls import split_host

__all__ = [
    "EVERY_DEAD",
    "DeadFilter",
    "DeadLetter",
    "Inspection",
    "Replay",
    "StateName",
    "UrlState",
    "host_matches",
]

StateName = Literal["queued", "in_flight", "delayed", "done", "dead", "unseen"]
"""Where a fingerprint is in the frontier (`UrlState.state`)."""


@dataclass(frozen=True, slots=True)
class UrlState:
    """One fingerprint's state in the frontier, as `Inspection.inspect` reads it.

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
    """Which dead letters `Inspection.dead_letters` and `Inspection.replay_dead` act on.

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
    """A dead-lettered request, as `Inspection.dead_letters` streams it.

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


@dataclass(slots=True)
class Replay:
    """What `Inspection.replay_dead` did with the dead letters it was given.

    Attributes:
        queued: Dead letters put back in their host queues.
        by_reason: Of those, how many per dead-letter reason (the one they had).
        refused: Admitted dead letters left dead as they were for lack of room (a ``block``
            `QueueBounds`): replaying them again once there is room requeues them.
        dropped: Requests dead-lettered as `crawlq.frontier.queue.FRONTIER_FULL` at a
            ``drop-lowest`` bound:
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


class Inspection(Protocol):
    """Looking at one URL and at the dead letters, and replaying them."""

    async def inspect(self, fingerprint: bytes) -> UrlState:
        """Read where one fingerprint is now, and what the frontier knows of it.

        One atomic read (a snapshot), no write: a URL moving on meanwhile shows as it was.

        Args:
            fingerprint: A 20-byte request fingerprint (`crawlq.urls.fingerprint`).

        Returns:
            Its state (``unseen`` when it was never pushed).
        """
        ...

    def dead_letters(self, where: DeadFilter = EVERY_DEAD) -> AsyncIterator[DeadLetter]:
        """Stream the dead letters that ``where`` matches, in no particular order.

        Read in chunks: memory does not grow with their number. Not a snapshot: a dead
        letter replayed or written during the stream may be yielded or not; one present and
        unchanged throughout is yielded once. A stored request that does not decode (shared
        state is untrusted) is logged and skipped.
        """
        ...

    async def replay_dead(
        self,
        where: DeadFilter = EVERY_DEAD,
        admit: Callable[[DeadLetter], bool] | None = None,
        bounds: QueueBounds | None = None,
    ) -> Replay:
        """Put the dead letters that ``where`` matches back in the queue, attempts afresh.

        For failures whose cause is gone (a site that was down, a flag flipped). Each goes
        back under its fingerprint to its place in its host's queue (its priority and push
        order), so it is fetched once more, under its host's politeness; a host whose
        breaker had declared it down starts afresh. ``--retry-dead`` is this with no filter.

        A replay is a producer's push under the job's bounds
        (`crawlq.frontier.queue.QueueBounds`), checked atomically with
        each requeue: at a ``block`` bound a dead letter that does not fit stays dead as it
        was (``refused``; the caller waits for room and replays again, as a seeding
        producer offers again); at a ``drop-lowest`` bound it goes back and the lowest
        priority request of its host's queue, maybe itself, is dead-lettered as
        `crawlq.frontier.queue.FRONTIER_FULL` (``dropped``).

        Args:
            where: Which dead letters.
            admit: Called with each matching dead letter; one it returns False for stays
                dead (the caller's scope check: a dead letter that the job's scope no longer
                takes is not fetched again). None admits all.
            bounds: The job's queue bounds this replay is held to (an operator's replay reads
                them from the job's settings); None: the bounds the frontier was opened with.

        Returns:
            What was requeued (by reason), refused and dropped.
        """
        ...
