"""The item keys contract (`ItemKeys`): which page owns each item dedup key of a job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["ItemKeys"]


class ItemKeys(Protocol):
    """Item dedup across the job: the first page to claim a key owns it."""

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
