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
* **Pushback and failures.** `HostRules.host_strike` counts a host's 429/503 answers and connection
  failures in a row (any ack of one of its requests resets them) and pauses the host for
  every worker; `crawlq.rules.politeness` decides the numbers. A host whose breaker declared it
  down has its queued requests leased at once, flagged ``Lease.host_down``, so that the
  worker dead-letters them without a request.
* **Time.** "Now" comes from the backend's `crawlq.clock.Clock` (Unix ms); in a cluster the
  workers' wall clocks are assumed to agree to well under the smallest host delay.
* **robots.txt.** The job keeps one copy of each origin's robots.txt (`RobotsRecord`), so that
  it is fetched once per origin per job, not once per worker: a worker reads it and, if it is
  missing or expired, claims its fetch in the same step (`SharedRobots.robots_claim`); the
  claimer fetches and stores the result (`SharedRobots.robots_put`), while the others wait for
  it and ask again (`SharedRobots.robots_get` only reads). Beyond its expiry, what a record
  means is the worker's business.
* **Looking at one URL and at the dead letters.** `Inspection.inspect` reads one fingerprint's
  state, `Inspection.dead_letters` streams the dead letters that match a `DeadFilter`, and
  `Inspection.replay_dead` puts
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

The contract is six narrow ones, each a Protocol in the module of its name with the values
it speaks in, and each implemented by every backend in a module of the same name
(`crawlq.frontier.sqlite.queue` beside `crawlq.frontier.redis.queue`, ...):

| contract | methods | module |
|---|---|---|
| `WorkQueue` | push, offer, lease, renew, ack, retry, dead, release, stats | ``queue`` |
| `HostRules` | set_host_policy, host_strike, proxy_failure, proxy_ok, proxy_states | ``hosts`` |
| `SharedRobots` | robots_get, robots_claim, robots_put (`RobotsRecord`) | ``robots`` |
| `JobRecord` | job_settings | ``job`` |
| `Inspection` | inspect, dead_letters, replay_dead | ``inspection`` |
| `ItemKeys` | claim_item_keys | ``items`` |

`Frontier` is all six and ``close``: what a backend object is, and what a worker holds. A
caller that needs one piece types against that piece. A backend's queue bounds and host
politeness are fixed when it is opened (`crawlq.frontier.open_frontier`). What status
reports beyond `WorkQueue.stats` comes through `crawlq.frontier.status.job_status`, which
needs nothing more from a backend than this contract.
"""

from __future__ import annotations

from typing import Protocol

from crawlq.frontier.hosts import HostRules
from crawlq.frontier.inspection import Inspection
from crawlq.frontier.items import ItemKeys
from crawlq.frontier.job import JobRecord
from crawlq.frontier.queue import WorkQueue
from crawlq.frontier.robots import SharedRobots

__all__ = ["Frontier"]


class Frontier(WorkQueue, HostRules, SharedRobots, JobRecord, Inspection, ItemKeys, Protocol):
    """The crawl frontier: every narrow contract of one backend (see the module docstring)."""

    async def close(self) -> None:
        """Release resources; leases still held expire normally."""
        ...
