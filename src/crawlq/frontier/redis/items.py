"""Item keys on Redis (`crawlq.frontier.items.ItemKeys`): ``item_keys.lua``.

One hash per job, key digest -> owner page fingerprint (`crawlq.frontier.redis.keys`); the
Celery engine's tasks claim through the same frontier, so both engines share it.
"""

from __future__ import annotations

from collections.abc import Sequence

from crawlq.frontier.redis.client import RedisClient

__all__ = ["MAX_KEYS_PER_CALL", "RedisItemKeys"]

MAX_KEYS_PER_CALL = 1000
"""Keys sent in one script call (a page with more is claimed in several calls)."""


class RedisItemKeys(RedisClient):
    """`crawlq.frontier.items.ItemKeys.claim_item_keys`."""

    async def claim_item_keys(self, keys: Sequence[bytes], owner: bytes) -> list[bool]:
        """See `crawlq.frontier.items.ItemKeys.claim_item_keys`."""
        if len(owner) != 20 or any(len(k) != 20 for k in keys):
            raise ValueError("owner and keys must be 20-byte digests")
        out: list[bool] = []
        for start in range(0, len(keys), MAX_KEYS_PER_CALL):
            chunk = list(keys[start : start + MAX_KEYS_PER_CALL])
            got = await self._script("item_keys", [self.keys.item_keys], [owner, *chunk])
            out += [bool(int(v)) for v in got]
        return out
