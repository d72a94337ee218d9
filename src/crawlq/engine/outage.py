"""How long the engines wait before trying a backend again during an outage.

A frontier or store outage (`crawlq.errors.FrontierUnavailable`, `StoreUnavailable`: Redis
restarting, a lost connection, PostgreSQL failing over) is ridden out, never fatal: the
worker keeps its results and tries again after `outage_wait_s`, an exponential backoff with
equal jitter (`crawlq.rules.retry.backoff_s`) from `OUTAGE_BASE_S`, capped at `OUTAGE_CAP_S`.
Every wait of that kind in the engines (the native worker's lease, store write and
settle calls, a worker waiting for its frontier at start, the final counts of a
multi-process run, the Celery crawl's watch loop and its tasks) is computed here.

A Redis at its ``maxmemory`` (`crawlq.errors.FrontierFull`) is not an outage and not fatal
to a worker either: its queue drains (leases, settles and heartbeats are allowed at
``maxmemory``, see `crawlq.frontier.redis.scripts`), and only its pushes of new URLs are
refused. `FullFrontier` counts those links as not followed (``frontier_full``) and logs the
state once per `FULL_LOG_EVERY_S`.

All values are seconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from crawlq.clock import Clock, Every
from crawlq.errors import FrontierFull, FrontierUnavailable, StoreUnavailable
from crawlq.frontier.queue import FRONTIER_FULL, FULL_LOG_EVERY_S
from crawlq.rules.retry import backoff_s

__all__ = [
    "CELERY_BROKER_DOWN_CAP_S",
    "CELERY_RESEND_BASE_S",
    "CELERY_RESEND_CAP_S",
    "CELERY_WATCH_CAP_S",
    "OUTAGE_BASE_S",
    "OUTAGE_CAP_S",
    "OUTAGE_LOG_EVERY",
    "OUTAGE_LOG_FIRST",
    "READ_CAP_S",
    "READ_TRIES",
    "FullFrontier",
    "call_through_outage",
    "celery_resend_delay_s",
    "outage_logged",
    "outage_wait_s",
    "read_through_outage",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

OUTAGE_BASE_S = 0.5
"""First wait after a failed call to a backend that is down."""

OUTAGE_CAP_S = 2.0
"""Longest wait between two tries of a worker's call to a backend that is down: a worker
polls a restarting Redis or PostgreSQL, so it is back within this many seconds of the
backend's return (a longer cap left workers idle for up to twice as long as the outage)."""

OUTAGE_LOG_EVERY = 15
"""After the first `OUTAGE_LOG_FIRST` failed tries in a row, one log line per this many tries
(about every 20 s at `OUTAGE_CAP_S`): a long outage is not a line per poll."""

OUTAGE_LOG_FIRST = 3
"""Failed tries in a row that are each logged."""

READ_CAP_S = 15.0
"""Longest wait between two tries of the final counts a command reads at its end."""

READ_TRIES = 8
"""Tries (with backoff, about a minute in all) of a read of the final counts in a backend
outage: the workers ride out an outage, so the command that waited for them should too."""

CELERY_WATCH_CAP_S = 10.0
"""Longest wait between two tries of ``crawl --engine celery``'s watch loop (its progress
reads and its sweep for lost tasks) while Redis or the broker is down."""

CELERY_RESEND_BASE_S = 2.0
"""Base of the delay before a Celery task that met an outage (or a configuration error in its
worker) is sent again; the delay is its second backoff step."""

CELERY_RESEND_CAP_S = 60.0
"""Longest delay before a Celery task that met an outage is sent again."""

CELERY_BROKER_DOWN_CAP_S = CELERY_RESEND_BASE_S * 5
"""Longest wait of a Celery task that could not send itself again either (the broker is down
too), before it runs once more."""


def outage_wait_s(failures: int, cap_s: float = OUTAGE_CAP_S) -> float:
    """Seconds to wait after ``failures`` failed tries in a row (>= 1) of a backend call.

    Exponential from `OUTAGE_BASE_S`, equal jitter, at most ``cap_s``.
    """
    return backoff_s(failures, OUTAGE_BASE_S, cap_s)


def outage_logged(failures: int) -> bool:
    """Whether the ``failures``-th failed try in a row (>= 1) of a backend call gets a log line.

    The first `OUTAGE_LOG_FIRST` do, then one in `OUTAGE_LOG_EVERY`.
    """
    return failures <= OUTAGE_LOG_FIRST or failures % OUTAGE_LOG_EVERY == 0


def celery_resend_delay_s() -> float:
    """Countdown of a Celery task sent again after an outage (about 2-4 s, jittered)."""
    return backoff_s(2, CELERY_RESEND_BASE_S, CELERY_RESEND_CAP_S)


async def read_through_outage(read: Callable[[], Awaitable[_T]]) -> _T:
    """``read()``, tried up to `READ_TRIES` times through a frontier or store outage.

    Raises:
        FrontierUnavailable, StoreUnavailable: The backend was still down at the last try.
    """
    for failures in range(1, READ_TRIES + 1):
        try:
            return await read()
        except (FrontierUnavailable, StoreUnavailable) as exc:
            if failures == READ_TRIES:
                raise
            delay = outage_wait_s(failures, READ_CAP_S)
            logger.warning("backend unavailable (%s); retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


async def call_through_outage(
    what: str,
    op: Callable[[], Awaitable[_T]],
    *,
    forced: Callable[[], bool] = lambda: False,
    failed: FrontierUnavailable | None = None,
) -> _T:
    """Run a frontier operation until the frontier answers, waiting `outage_wait_s` between tries.

    A frontier outage (Redis restarting) pauses the caller instead of failing it: a worker's
    outcomes already computed stay buffered and are written when it is back.

    Args:
        what: The operation, for the log lines (``ack``, ``push``...).
        op: The call to make.
        forced: True once a forced stop (a second Ctrl-C) asks to give up waiting.
        failed: The error of a first try the caller made itself (its fast path: this module
            is entered only when the frontier is down); the wait comes before the next try.

    Raises:
        FrontierUnavailable: The frontier is down and ``forced()`` says stop waiting
            (unsettled leases then expire normally).
    """
    failures = 0
    error = failed
    while True:
        if error is not None:
            if forced():
                raise error
            failures += 1
            delay = outage_wait_s(failures)
            if outage_logged(failures):
                logger.warning(
                    "frontier unavailable during %s (%s); keeping results, try %d, retrying in"
                    " %.1fs",
                    what,
                    error,
                    failures,
                    delay,
                )
            await asyncio.sleep(delay)
        try:
            result = await op()
        except FrontierUnavailable as exc:
            error = exc
            continue
        if failures:
            logger.warning("frontier reachable again after %d failed tries", failures)
        return result


class FullFrontier:
    """A worker's pushes of new URLs to a frontier whose Redis is at its ``maxmemory``.

    `attempt` runs a step that queues links; when Redis refuses (`FrontierFull`) they are not
    followed: the caller counts them with the reason ``frontier_full`` (`FRONTIER_FULL`, as a
    scope reason), and the state is logged at once, then once per `FULL_LOG_EVERY_S` while it
    lasts (with the links refused so far), instead of once per push.

    Args:
        clock: Where the monotonic time of the log lines comes from (tests).
    """

    reason = FRONTIER_FULL
    """The not-followed reason of a link Redis refused."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.full = False
        """The last push was refused."""
        self.refused = 0
        """Links refused in all."""
        self._full_log = Every(FULL_LOG_EVERY_S, clock)
        self._room_log = Every(FULL_LOG_EVERY_S, clock)

    async def attempt(self, n: int, op: Callable[[], Awaitable[_T]]) -> _T | None:
        """``op()``, a step that queues ``n`` links; None when a full Redis refused it.

        For any step that adds links (the Celery engine's ``admit`` answers one flag per link;
        the worker's flush, `crawlq.engine.flush.Flusher.push`, spells the same steps inline
        so that this module is entered only when Redis is full or down): a refusal counts
        ``n`` links and logs the state as `refused_links` does.

        Raises:
            FrontierError: Any other error of ``op``.
        """
        try:
            answer = await op()
        except FrontierFull as exc:
            self.refused_links(n, exc)
            return None
        if self.full:
            self.room_again()
        return answer

    def room_again(self) -> None:
        """Note that a push was queued after refusals; log it if a line is due."""
        self.full = False
        if self._room_log.due():
            logger.warning("Redis has room again: new links are queued again")

    def refused_links(self, n: int, exc: FrontierFull) -> None:
        """Note ``n`` links refused by a full Redis; log the state if a line is due."""
        self.full = True
        self.refused += n
        if self._full_log.due():
            logger.warning(
                "Redis is full (at its maxmemory): still draining the queue; new links are"
                " not followed (%s: %d so far). %s",
                FRONTIER_FULL,
                self.refused,
                exc,
            )
