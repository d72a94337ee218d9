"""The lease wait loop every frontier backend shares: try, and if nothing is ready, wait.

`Frontier.lease` (see `crawlq.frontier.contract`) returns at once with what is ready, or waits
up to ``wait_s`` seconds for a request to become ready. The waiting rule is the same for
every backend; only "try once" and "sleep until woken or timed out" differ (one SQLite
transaction and an `asyncio.Event`; one Lua call and a blocking Redis list pop). So a backend
passes those two steps in, and this module decides when to try again and when to give up:

* A try returns the leases it got and the Unix ms at which the earliest not-yet-ready request
  becomes ready (a host's next-allowed time, a retry's due time, a lease's expiry), or
  ``None`` when nothing queued, delayed or leased could ever become ready ("drained").
* Leases, or ``wait_s`` used up, end the wait. So does "drained" after at least one wait (or
  at once with ``until_drained``): nothing will become ready unless someone pushes, and a
  caller waiting for a drained frontier is told so rather than held for the whole ``wait_s``.
* Otherwise sleep until the earliest ready time, the end of ``wait_s`` or ``max_sleep_s``
  (a backend whose wake-up signal can be missed re-checks at least that often), whichever
  comes first, unless woken earlier.

The ``fetched`` leases (requests done, slots to free; see `Frontier.lease`) go with the first
try only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence

from crawlq.clock import Clock
from crawlq.request import Lease

__all__ = ["MAX_LEASE_BATCH", "Sleep", "TryLease", "check_lease_args", "lease_with_wait"]

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
