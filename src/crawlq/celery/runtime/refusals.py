"""Workers that refuse a job: why (``refusals``), and URLs refused too often (``refuse.lua``).

A worker that refuses the job's tasks (a store, spider or setting mismatch) records why under
its name and counts a refusal of each of the task's URLs, in one step; a URL refused
``limit`` times is dead-lettered ``worker_refused`` in Redis (its dead letter waits in
``refused_dead`` until ``crawl --engine celery`` writes it to the job's store, which the
refusing worker cannot do: it is the store it refuses). Reads are of shared state: records
that do not decode are skipped. A narrow part over the job's
`crawlq.celery.runtime.state.CeleryState`: its connection, job id and error translation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crawlq.celery.runtime.state import CeleryState
from crawlq.frontier.redis.refusals import (
    MAX_REFUSERS,
    Refusal,
    read_refusals,
    refusal_from,
)
from crawlq.request import CrawlRequest

__all__ = ["REFUSED_DEAD", "REFUSED_RESEND", "REFUSED_SETTLED", "Refusals", "RefusedDead"]

REFUSED_RESEND = 0
"""`Refusals.refuse`: send the URL again (refused fewer than ``limit`` times)."""
REFUSED_DEAD = 1
"""`Refusals.refuse`: the URL is dead-lettered ``worker_refused`` now."""
REFUSED_SETTLED = 2
"""`Refusals.refuse`: another worker already stored the URL's outcome: drop the task."""


@dataclass(frozen=True, slots=True)
class RefusedDead:
    """A URL dead-lettered ``worker_refused``, not yet written to the job's store.

    Attributes:
        fingerprint: Its 20-byte fingerprint (the key in ``refused_dead``).
        request: The request.
        refusal: The last refusal (worker, reason, when).
        refusals: How many times its task was refused.
    """

    fingerprint: bytes
    request: CrawlRequest
    refusal: Refusal
    refusals: int


class Refusals:
    """Recording the refusals of the job that ``state`` joined, reading them back.

    Args:
        state: The job's state in Redis.
    """

    def __init__(self, state: CeleryState) -> None:
        self.state = state

    async def refuse(
        self, refusal: Refusal, requests: Sequence[CrawlRequest], limit: int
    ) -> list[int]:
        """Record ``refusal`` and count one refusal of each request, in one step.

        Returns:
            One of `REFUSED_RESEND`, `REFUSED_DEAD`, `REFUSED_SETTLED` per request.

        Raises:
            JobGone: The job is gone or replaced.
            FrontierUnavailable: Redis does not answer.
        """
        k = self.state.keys
        record = refusal.encode()
        args: list[Any] = [refusal.worker, record, max(1, limit), MAX_REFUSERS]
        for request in requests:
            dead = json.loads(record) | {"request": request.to_json(), "refusals": limit}
            args += [request.fingerprint, request.to_json(), json.dumps(dead)]
        keys = [
            k.refusals, k.refused, k.refused_dead, k.seen, k.pending, k.pending_at, k.stats,
            k.dead_requests,
        ]  # fmt: skip
        return [int(x) for x in await self.state.script("refuse", keys, args)]

    async def refusals(self) -> list[Refusal]:
        """The workers' last refusals of the job, newest first (at most `MAX_REFUSERS`)."""
        values = await self.state.call(lambda: self.state.client.hgetall(self.state.keys.refusals))
        return read_refusals(values)

    async def refused_dead(self, limit: int = 500) -> list[RefusedDead]:
        """URLs dead-lettered ``worker_refused`` that wait to be written to the store.

        Records that do not decode are deleted (shared state: nobody can write them anyway).
        """
        k = self.state.keys
        got = await self.state.call(lambda: self.state.client.hscan(k.refused_dead, 0, count=limit))
        out: list[RefusedDead] = []
        bad: list[bytes] = []
        page: dict[Any, Any] = got[1] if isinstance(got[1], dict) else {}
        for key, raw in list(page.items())[:limit]:
            fp = key if isinstance(key, bytes) else str(key).encode()
            found = _refused_dead(fp, raw)
            if found is None:
                bad.append(fp)
            else:
                out.append(found)
        if bad:
            await self.forget_refused_dead(bad)
        return out

    async def forget_refused_dead(self, fingerprints: Sequence[bytes]) -> None:
        """Their dead letters are in the store now: take them out of ``refused_dead``."""
        if fingerprints:
            fps = list(fingerprints)
            await self.state.call(
                lambda: self.state.client.hdel(self.state.keys.refused_dead, *fps)
            )


def _refused_dead(fp: bytes, raw: Any) -> RefusedDead | None:
    try:
        value = json.loads(raw)
        refusal = refusal_from(value)
        request = CrawlRequest.from_json(value["request"])
        count = value.get("refusals")
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    if refusal is None or request.fingerprint != fp:
        return None
    return RefusedDead(fp, request, refusal, count if type(count) is int else 0)
