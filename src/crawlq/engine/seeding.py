"""``crawlq seed``: push seed requests into a job's frontier, deduplicated, in chunks.

The job's settings are planned from the seeds (`crawlq.engine.plan.plan_seed`) and stored by
the first producer. The requests go in chunks of `SEED_CHUNK`; while the frontier is full
(``max_queued``, ``when_full = "block"``) the producer offers them again every
`PUSH_RETRY_S` seconds, for at most ``max_push_wait_s``. A replay of dead letters is a
producer too (`replay_into_room`: ``seed --retry-dead``, ``crawlq dead replay``): it waits
for room the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crawlq.engine.backends import open_backends
from crawlq.engine.plan import plan_seed
from crawlq.engine.seed_hosts import new_private_seed_hosts, warn_private_seed_hosts
from crawlq.errors import (
    FrontierError,
    QueueFullTimeout,
    SeedInterrupted,
)
from crawlq.frontier import Frontier
from crawlq.frontier.base import EVERY_DEAD, DeadFilter, DeadLetter, QueueBounds, Replay
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.urls import UrlRules

__all__ = ["PUSH_RETRY_S", "SEED_CHUNK", "SeedResult", "replay_into_room", "seed"]

logger = logging.getLogger(__name__)

SEED_CHUNK = 500
"""Seed requests pushed per call: what `seed` can count as queued when the frontier fails
part way (the Redis frontier pushes at most this many in one script)."""

PUSH_RETRY_S = 0.5
"""How often a producer offers its waiting requests again while the frontier is full."""


@dataclass(frozen=True, slots=True)
class SeedResult:
    """What `seed` did.

    Attributes:
        given: Requests given.
        queued: Requests that were new to the job and are now queued.
        settings: The job's settings in force.
        private_hosts: Hosts of these seeds that the job's private-address guard will refuse
            (the job existed with other seed hosts and without ``allow_private``).
        replayed: Dead letters put back in the queue first (``retry_dead``).
    """

    given: int
    queued: int
    settings: Settings
    private_hosts: tuple[str, ...] = ()
    replayed: int = 0


async def seed(
    settings: Settings, requests: Sequence[CrawlRequest], *, retry_dead: bool = False
) -> SeedResult:
    """Push seed requests into the job's frontier (deduplicated), storing the job's settings.

    The job's settings are planned by `crawlq.engine.plan.plan_seed` (allowed domains: the
    settings', else the seeds' hosts). The seeds' hosts become the job's seed hosts
    (exempt from the private-address guard) when this call creates the job; on an existing
    job, seeds on other hosts that resolve to private addresses are logged as a warning and
    returned in `SeedResult.private_hosts`. With ``retry_dead`` the job's dead letters are
    requeued first.

    Raises:
        ConfigError: Settings conflict with the job's, or no job name on a shared frontier.
        FrontierUnavailable: The frontier cannot be reached.
        SeedInterrupted: The frontier failed (Redis at its maxmemory: `FrontierFull`, or an
            outage) after the job was opened; it says how many requests were queued before
            (``queued``). Re-running the same seed resumes: queued ones are skipped.
    """
    settings = plan_seed(settings, requests)
    async with open_backends(settings, create=True, runs_spider=False) as backends:
        private = await new_private_seed_hosts(settings, backends.settings)
        warn_private_seed_hosts(backends.settings, private)
        replayed = 0
        if retry_dead:
            replay, _, timeout = await replay_into_room(
                backends.frontier, max_wait_s=backends.settings.max_push_wait_s
            )
            if timeout is not None:
                raise SeedInterrupted(0, len(requests), timeout)
            replayed = replay.queued
        rules = UrlRules(backends.settings.strip_url_params)  # the job's, as for its links
        requests = [r.rewritten(rules) for r in requests]
        queued = 0
        s = backends.settings
        try:
            for start in range(0, len(requests), SEED_CHUNK):
                chunk = list(requests[start : start + SEED_CHUNK])
                waited_since: float | None = None
                while True:
                    offer = await backends.frontier.offer(chunk)
                    queued += offer.queued
                    if not offer.refused:
                        break
                    waited_since = _room_wait(
                        waited_since, backends.frontier.bounds, s.max_push_wait_s, queued
                    )
                    await asyncio.sleep(PUSH_RETRY_S)
                if waited_since is not None:
                    logger.warning("frontier has room again: seeding goes on")
        except FrontierError as exc:
            raise SeedInterrupted(queued, len(requests), exc) from exc
        return SeedResult(len(requests), queued, backends.settings, tuple(private), replayed)


async def replay_into_room(
    frontier: Frontier,
    where: DeadFilter = EVERY_DEAD,
    admit: Callable[[DeadLetter], bool] | None = None,
    *,
    max_wait_s: float | None = None,
) -> tuple[Replay, bool, QueueFullTimeout | None]:
    """Replay dead letters as a producer pushes: under the frontier's bounds, waiting for room.

    `Frontier.replay_dead` requeues what fits; at a ``block`` bound the dead letters left
    (refused) are replayed again every `PUSH_RETRY_S` seconds while the workers make room,
    for at most ``max_wait_s`` seconds of waiting (None: no limit), as `seed` offers its
    requests again. At ``drop-lowest`` nothing waits: the frontier dead-letters the lowest
    priorities as ``frontier_full`` (counted in `Replay.dropped`).

    Returns:
        What was replayed in all (``refused``: those still dead when the wait ran out),
        whether it waited for room, and the `QueueFullTimeout` when the wait ran out.
    """
    total = Replay()
    waited_since: float | None = None
    while True:
        done = await frontier.replay_dead(where, admit)
        total.add(done)
        total.refused = done.refused
        if not done.refused:
            break
        try:
            waited_since = _room_wait(waited_since, frontier.bounds, max_wait_s, total.queued)
        except QueueFullTimeout as exc:
            return total, True, exc
        await asyncio.sleep(PUSH_RETRY_S)
    if waited_since is not None:
        logger.warning("frontier has room again: the replay goes on")
    return total, waited_since is not None, None


def _room_wait(
    waited_since: float | None, bounds: QueueBounds, limit: float | None, queued: int
) -> float:
    """Note a wait for room in a full frontier (`QueueBounds` ``block``); say so once.

    Returns when the wait began (monotonic seconds).

    Raises:
        QueueFullTimeout: The frontier has stayed full for ``limit`` seconds (None: never).
    """
    now = time.monotonic()
    if waited_since is None:
        logger.warning(
            "frontier full (max_queued %s, per host %s): waiting for workers to make room;"
            " %d queued so far",
            bounds.max_queued,
            bounds.max_queued_per_host,
            queued,
        )
        waited_since = now
    if limit is not None and now - waited_since >= limit:
        raise QueueFullTimeout(limit, bounds.max_queued)
    return waited_since
