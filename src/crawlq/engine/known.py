"""A worker's bounded memory of fingerprints the frontier has already seen.

The frontier's seen set is the authority on dedup, and it only grows: once a fingerprint
has been pushed (or leased), every later push of it is a no-op. A worker that remembers the
fingerprints it pushed and leased recently can drop those links before the push call, which
saves the frontier a lookup per link (navigation links repeat on every page). Forgetting is
always safe: a forgotten fingerprint is simply pushed again and deduplicated by the frontier.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from crawlq.request import CrawlRequest

__all__ = ["KnownFingerprints"]


class KnownFingerprints:
    """Two generations of fingerprint sets, holding up to 2x ``capacity`` of them (~13 MiB).

    When the young generation reaches ``capacity`` it becomes the old one and the previous
    old one is dropped, so memory stays bounded (about 100 bytes per entry) while recently
    seen fingerprints (the ones that repeat) stay known.

    The default holds the last 65,536-131,072 fingerprints, enough for the navigation links
    that repeat across the pages of a large crawl (bench/RESULTS.md has the measurements);
    the memory (~13 MiB) is reached once and stays flat.

    Args:
        capacity: Fingerprints per generation, at least 1.

    Raises:
        ValueError: ``capacity`` is less than 1.
    """

    def __init__(self, capacity: int = 65536) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._young: set[bytes] = set()
        self._old: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def __contains__(self, fingerprint: object) -> bool:
        return fingerprint in self._young or fingerprint in self._old

    def add_all(self, fingerprints: Iterable[bytes]) -> None:
        """Remember fingerprints the frontier has seen (pushed or leased)."""
        for fp in fingerprints:
            if fp not in self._young:
                self._young.add(fp)
                if len(self._young) >= self.capacity:
                    self._old, self._young = self._young, set()

    def unknown(self, requests: Sequence[CrawlRequest]) -> list[CrawlRequest]:
        """Return the requests whose fingerprint is not known, each fingerprint once.

        Args:
            requests: Discovered requests, in order.

        Returns:
            The first request of each fingerprint that is neither known nor repeated earlier
            in ``requests``, in their order.
        """
        young, old = self._young, self._old
        batch: set[bytes] = set()
        out: list[CrawlRequest] = []
        for req in requests:
            fp = req.fingerprint
            if fp in young or fp in old or fp in batch:
                continue
            batch.add(fp)
            out.append(req)
        return out
