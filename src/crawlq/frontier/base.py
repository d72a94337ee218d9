"""The frontier contract, written once from the caller's side. Every backend passes one suite.

A frontier holds every request a crawl has seen and hands the ready ones to workers under
leases. The states of a request, by fingerprint:

```
push ─► queued ──lease──► leased ──ack──► done
          ▲  ▲              │ │ └─dead──► dead (dead-letter record, with reason)
          │  └──release─────┘ │               replay_dead: dead ─► queued
          │  └──lease expires─┤   (its worker died: not renewed within the timeout)
          └─due── delayed ◄───┘retry(delay_s)
```

* **Dedup.** A fingerprint enters once, ever: pushing a seen fingerprint (in any state,
  including done and dead) does nothing. Atomic: two workers pushing one URL at once queue it
  once.
* **Order.** Among the hosts politeness allows *now*, a higher ``priority`` is served first;
  within a priority, first in first out (docs/architecture.md invariant 5).
* **Politeness.** A host has a delay (seconds between the starts of two requests) and a
  concurrency (requests at once). A lease moves the host's next-allowed time and in-flight
  count in the same atomic step; the slot is freed when the worker reports the request done
  (``lease(fetched=...)``) or when the lease is settled (ack, retry, dead, release, expiry),
  whichever comes first. This holds for every worker at once (invariant 3).
* **Pushback and failures.** `host_strike` counts a host's 429/503 answers and connection
  failures in a row (any ack of one of its requests resets them) and pauses the host for
  every worker; `crawlq.rules.politeness` decides the numbers. A host whose breaker declared it
  down has its queued requests leased at once, flagged ``Lease.host_down``, so that the
  worker dead-letters them without a request.
* **Time.** "Now" comes from the backend's `crawlq.clock.Clock` (Unix ms); in a cluster the
  workers' wall clocks are assumed to agree to well under the smallest host delay.
* **robots.txt.** The job keeps one copy of each origin's robots.txt (`RobotsRecord`), so that
  it is fetched once per origin per job, not once per worker: a worker reads it and, if it is
  missing or expired, claims its fetch in the same step (`robots_claim`); the claimer fetches
  and stores the result (`robots_put`), while the others wait for it and ask again
  (`robots_get` only reads). Beyond its expiry, what a record means is the worker's business.
* **Looking at one URL and at the dead letters.** `inspect` reads one fingerprint's state,
  `dead_letters` streams the dead letters that match a `DeadFilter`, and `replay_dead` puts
  them back in their host queues, attempts counted afresh: the same request under the same
  fingerprint, so dedup and politeness hold as for any queued request, and the caller's
  ``admit`` check (the job's scope) decides which may go back. None of them waits for
  leases, and `inspect` and `dead_letters` write nothing.
* **Settling a lease that is no longer held** (it expired and went to someone else, or was
  already settled) changes nothing and is reported through the return value, never raised:
  the store's idempotent writes absorb the duplicate fetch.

Errors: every method may raise `crawlq.errors.FrontierUnavailable` when the backend cannot be
reached or is not ready; callers back off and retry. Any other `crawlq.errors.FrontierError`
is permanent (a shared job that is gone or was replaced: `JobGone`): retrying does not fix
it, and a worker stops on it. A Redis at its maxmemory refuses only `push` (and the other
steps that add URLs) with `FrontierFull`; the calls that drain a job go on, and a worker
counts the links it could not push (``frontier_full``). Arguments out of range raise
``ValueError`` naming them.

The values these methods take and return (`FrontierStats`, `QueueBounds`, `UrlState`,
`DeadLetter`, ...) are defined in `crawlq.frontier.values` (import them from there). What status
reports beyond `Frontier.stats` comes through `crawlq.frontier.status.job_status`, which needs
nothing more from a backend than this contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from crawlq.frontier.values import (
    EVERY_DEAD,
    DeadFilter,
    DeadLetter,
    FrontierStats,
    Offer,
    QueueBounds,
    Replay,
    UrlState,
)
from crawlq.request import CrawlRequest, Lease
from crawlq.robots_record import RobotsRecord
from crawlq.rules.politeness import HostPolicy, Politeness, Strike, StrikePlan
from crawlq.rules.proxies import BenchPlan, ProxyState

__all__ = ["Frontier"]


class Frontier(Protocol):
    """The crawl frontier (see the module docstring for the semantics every method shares)."""

    bounds: QueueBounds
    """The job's queue bounds (`QueueBounds`); unbounded by default. Assignable, e.g. once
    the job's settings are known."""

    politeness: Politeness
    """The job's host politeness rules (`crawlq.rules.politeness`): the default policy, and the
    per-host overrides written for each host when its first request is pushed. Assignable,
    e.g. once the job's settings are known."""

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
    ) -> Replay:
        """Put the dead letters that ``where`` matches back in the queue, attempts afresh.

        For failures whose cause is gone (a site that was down, a flag flipped). Each goes
        back under its fingerprint to its place in its host's queue (its priority and push
        order), so it is fetched once more, under its host's politeness; a host whose
        breaker had declared it down starts afresh. ``--retry-dead`` is this with no filter.

        A replay is a producer's push under the job's `bounds`, checked atomically with
        each requeue: at a ``block`` bound a dead letter that does not fit stays dead as it
        was (``refused``; the caller waits for room and replays again, as a seeding
        producer offers again); at a ``drop-lowest`` bound it goes back and the lowest
        priority request of its host's queue, maybe itself, is dead-lettered as
        `FRONTIER_FULL` (``dropped``).

        Args:
            where: Which dead letters.
            admit: Called with each matching dead letter; one it returns False for stays
                dead (the caller's scope check: a dead letter that the job's scope no longer
                takes is not fetched again). None admits all.

        Returns:
            What was requeued (by reason), refused and dropped.
        """
        ...

    async def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """Override the default politeness of one host (e.g. from robots.txt Crawl-delay)."""
        ...

    async def host_strike(self, host: str, strike: Strike, plan: StrikePlan) -> int:
        """Count one strike of ``host`` and pause it, in one atomic step for every worker.

        Increments the host's count of strikes of this kind in a row (an ack of any of its
        requests resets both kinds, and its breaker flags), then moves its next-allowed time
        to at least now + ``plan.pauses_s[count - 1]`` (the last entry repeats); a later
        next-allowed time is kept. From ``plan.probe_from`` on the host takes one request at a
        time; from ``plan.down_from`` on it is down (see the module docstring).

        Args:
            host: Politeness key.
            strike: Pushback (429/503) or connection failure.
            plan: The pause schedule (`crawlq.rules.politeness.Politeness.plan`).

        Returns:
            The count of this kind in a row, this strike included.
        """
        ...

    async def proxy_failure(self, proxy_id: str, plan: BenchPlan) -> ProxyState:
        """Count one failure of a proxy; bench it after ``plan.failures_to_bench`` in a row.

        One atomic step for every worker: a proxy benched already is left as it is (a
        request sent before the bench was seen counts nothing more); otherwise its failures
        in a row go up, and at ``plan.failures_to_bench`` it is benched until now +
        ``plan.length_ms(benches)`` and its count starts again (`crawlq.rules.proxies`).

        Args:
            proxy_id: `crawlq.rules.proxies.Proxy.id` (never a credential).
            plan: How many failures bench it, and for how long.

        Returns:
            Its state after this failure.
        """
        ...

    async def proxy_ok(self, proxy_id: str) -> None:
        """Forget a proxy's failures and benches in a row: a request through it succeeded."""
        ...

    async def proxy_states(self) -> dict[str, ProxyState]:
        """Every proxy with failures or a bench, by id (one read, for a worker's view)."""
        ...

    async def job_settings(self, proposed: dict[str, Any] | None) -> dict[str, Any] | None:
        """The settings stored with the job, storing ``proposed`` first if there are none.

        The first producer or worker of a job fixes its settings (politeness, retries, scope,
        spider) so that workers joining later need only the frontier URL and job name.

        Args:
            proposed: JSON-serialisable settings to store if the job has none yet, or None to
                only read.

        Returns:
            The stored settings (``proposed`` if they were just stored), or None.
        """
        ...

    async def robots_get(self, origin: str) -> RobotsRecord | None:
        """The job's stored robots.txt record of ``origin``, expired or not.

        A stored value that does not decode (corrupt, or larger than
        `crawlq.robots_record.MAX_RECORD_BYTES`: shared state is untrusted, invariant 7) is
        logged once and reported as missing, so the caller fetches robots.txt again and its
        `robots_put` replaces it.

        Args:
            origin: ``scheme://host[:port]`` (RFC 9309 §2.3: one robots.txt per origin).

        Returns:
            The record, or None when there is none (or none that can be read).
        """
        ...

    async def robots_claim(
        self, origin: str, holder: str, ttl_s: float, *, force: bool = False
    ) -> tuple[RobotsRecord | None, bool]:
        """Read ``origin``'s record and, unless it is fresh, claim its fetch: one atomic step.

        The single-flight step across processes, and the one round trip of a worker that does
        not have the origin in memory: a fresh record (`RobotsRecord.fresh_at` the backend's
        now) comes back unclaimed; otherwise (missing, unreadable, expired) the caller gets
        the claim unless another worker's live claim holds it. The claimer fetches robots.txt
        and calls `robots_put`; the others call again a little later (or give their lease
        back). A claim not followed by `robots_put` within ``ttl_s`` (its worker died) lapses,
        and the next caller gets it. Claiming again while holding the claim extends it.

        Args:
            origin: ``scheme://host[:port]``.
            holder: Stable id of the claimer (worker id and process).
            ttl_s: Seconds the claim is held at most (> 0): longer than one fetch may take.
            force: Claim even when the stored record looks fresh: the caller could not read
                it (the record is reported as None then).

        Returns:
            ``(record, claimed)``: the stored record (None when missing or unreadable; stale
            ones too, as the earlier copy RFC 9309 §2.4 lets a crawler keep while robots.txt
            is unreachable), and whether ``holder`` holds the claim now.
        """
        ...

    async def robots_put(self, origin: str, record: RobotsRecord) -> None:
        """Store ``origin``'s robots.txt record for every worker and end any claim on it.

        Replaces the stored record; in one atomic step with ending the claim, so a worker
        that sees no claim sees the record.
        """
        ...

    async def claim_item_keys(self, keys: Sequence[bytes], owner: bytes) -> list[bool]:
        """Record each item dedup key's owner page unless it has one: one atomic step.

        Item dedup across the job (`crawlq.engine.item_flow`): the first page to claim a
        key owns it for the life of the job; a key is never given to another page. Claiming
        again with the same owner (a page fetched again after its lease expired, parsed
        again, retried) answers True again, so a page keeps its items. Keys are digests
        (`crawlq.items.item_key`), never item values.

        Args:
            keys: 20-byte key digests, each once.
            owner: The page's record fingerprint (20 bytes).

        Returns:
            For each key in order: True when it was new or is owned by ``owner``, False when
            another page owns it.
        """
        ...

    async def stats(self) -> FrontierStats:
        """Current counts; cheap enough to call a few times a second."""
        ...

    async def close(self) -> None:
        """Release resources; leases still held expire normally."""
        ...
