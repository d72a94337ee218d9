"""The shared robots.txt on Redis (`crawlq.frontier.robots.SharedRobots`): one record per origin.

``robots_claim.lua`` reads a record and, unless it is fresh, claims its fetch (single flight
across workers); ``robots_put.lua`` stores the fetched record and ends the claim. A record
larger than `crawlq.frontier.robots.MAX_RECORD_BYTES` is not transferred; one that does not
decode is logged once per origin and refetched.
"""

from __future__ import annotations

import logging
from typing import Any

from crawlq.frontier.redis.client import RedisClient
from crawlq.frontier.robots import MAX_RECORD_BYTES, MAX_TTL_MS, RobotsRecord

__all__ = ["RedisRobots"]


logger = logging.getLogger(__name__)


class RedisRobots(RedisClient):
    """robots.txt records (`crawlq.frontier.robots.SharedRobots.robots_get`, ...)."""

    async def robots_get(self, origin: str) -> RobotsRecord | None:
        """See `crawlq.frontier.robots.SharedRobots.robots_get`.

        A value larger than `crawlq.frontier.robots.MAX_RECORD_BYTES` is not transferred.
        """
        got = await self._script("robots_get", [self.keys.robots], [origin, MAX_RECORD_BYTES])
        return self._robots_record(origin, got)

    def _robots_record(self, origin: str, got: Any) -> RobotsRecord | None:
        """Decode a stored record (None, bytes, or the length of one too large to send)."""
        if got is None:
            return None
        try:
            if isinstance(got, int):
                raise ValueError(f"{got} bytes, more than {MAX_RECORD_BYTES}")
            return RobotsRecord.from_bytes(got)
        except (ValueError, TypeError) as exc:
            if origin not in self._robots_warned:  # once per origin until it is replaced
                if len(self._robots_warned) < 10_000:
                    self._robots_warned.add(origin)
                logger.warning(
                    "unreadable robots.txt record of %s in job %r, refetching: %s",
                    origin,
                    self.job,
                    exc,
                )
            return None

    async def robots_claim(
        self, origin: str, holder: str, ttl_s: float, *, force: bool = False
    ) -> tuple[RobotsRecord | None, bool]:
        """See `crawlq.frontier.robots.SharedRobots.robots_claim`.

        Freshness is judged in the script from the record's header (``expires_at_ms``); a
        record that looks fresh there but does not decode here is claimed again with
        ``force``, so a corrupt record cannot block its origin until its claimed expiry.
        """
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        keys = [self.keys.robots, self.keys.robots_claims]
        claim_ms = max(1, round(ttl_s * 1000))
        while True:
            args = [
                origin, holder, self.clock.wall_ms(), claim_ms, MAX_RECORD_BYTES, MAX_TTL_MS,
                "1" if force else "0",
            ]  # fmt: skip
            got, claimed = await self._script("robots_claim", keys, args)
            record = self._robots_record(origin, got)
            if claimed or force or got is None or record is not None:
                return record, bool(claimed)
            force = True  # "fresh" by its header, unreadable here: claim it to refetch

    async def robots_put(self, origin: str, record: RobotsRecord) -> None:
        """See `crawlq.frontier.robots.SharedRobots.robots_put`."""
        keys = [self.keys.robots, self.keys.robots_claims]
        await self._script("robots_put", keys, [origin, record.to_bytes()])
        self._robots_warned.discard(origin)
