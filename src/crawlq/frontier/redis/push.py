"""Pushing requests into the Redis frontier: dedup, queue bounds, page budget (``push.lua``).

A push is sent in chunks of `PUSH_CHUNK` requests, one script call each. Scores are
``-priority * 2**33 + sequence`` (exact below 2**53), so priorities are clamped to
±(2**19 - 1).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from crawlq.frontier.redis.core import RedisCore
from crawlq.frontier.values import Offer
from crawlq.request import CrawlRequest

__all__ = ["PUSH_CHUNK", "PushMixin"]


logger = logging.getLogger(__name__)

_PRIORITY_LIMIT = 2**19 - 1  # scores are -priority * 2**33 + sequence, exact below 2**53
PUSH_CHUNK = 500
"""Requests per ``push.lua`` call."""


class PushMixin(RedisCore):
    """Push and offer (`crawlq.frontier.base.Frontier.push`, `offer`)."""

    async def push(self, requests: Sequence[CrawlRequest]) -> int:
        """See `crawlq.frontier.base.Frontier.push`. Sent in chunks of 500 per script call."""
        added = 0
        for start in range(0, len(requests), PUSH_CHUNK):
            added += (await self._push(requests[start : start + PUSH_CHUNK], None)).queued
        return added

    async def offer(self, requests: Sequence[CrawlRequest]) -> Offer:
        """See `crawlq.frontier.base.Frontier.offer`."""
        queued = refused = dropped = 0
        for start in range(0, len(requests), PUSH_CHUNK):
            got = await self._push(requests[start : start + PUSH_CHUNK], None, producer=True)
            queued, refused, dropped = (
                queued + got.queued,
                refused + got.refused,
                dropped + got.dropped,
            )
        return Offer(queued, refused, dropped)

    async def _push(
        self, requests: Sequence[CrawlRequest], claim_of: str | None, *, producer: bool = False
    ) -> Offer:
        k = self.keys
        seen_key, mode, nbits = self._dedup_args()
        hosts: dict[str, int] = {}
        body: list[Any] = []
        for req in requests:
            hidx = hosts.setdefault(req.host, len(hosts) + 1)
            priority = max(-_PRIORITY_LIMIT, min(_PRIORITY_LIMIT, req.priority))
            body += [req.fingerprint, hidx, priority, f"{req.host}\n{req.to_json()}"]
            if self.bloom is not None:
                body += self.bloom.positions(req.fingerprint)
        b = self.bounds
        args = [
            self.clock.wall_ms(), self.politeness.default.concurrency, mode, nbits,
            "1" if claim_of else "0",
            b.max_queued or 0, b.max_queued_per_host or 0,
            "drop" if b.when_full == "drop-lowest" else "block", "1" if producer else "0",
        ]  # fmt: skip
        overrides: list[Any] = []
        for host, hidx in hosts.items():
            policy = self.politeness.configured(host)
            if policy is not None:
                overrides += [hidx, round(policy.delay_s * 1000), policy.concurrency]
        budget = self.politeness.max_pages_per_host
        args += [len(hosts), *hosts, len(overrides) // 3, *overrides]
        args += [-1 if budget is None else budget, *body]
        keys = [
            *k.host_keys(), seen_key, k.reqs, k.scores, k.stats, k.claim(claim_of or "-"),
            k.admitted, k.dead, k.dead_at, *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        queued, refused, dropped = await self._script("push", keys, args)
        if dropped:
            logger.warning(
                "job %s: frontier full, %d request(s) dead-lettered as frontier_full",
                self.job,
                dropped,
            )
        return Offer(int(queued), int(refused), int(dropped))
