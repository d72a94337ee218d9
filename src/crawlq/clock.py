"""Time sources. Every frontier step takes "now" from one `Clock`, so tests can stop time.

Wall time (Unix milliseconds) orders leases, retries and politeness windows and is shared by
every worker: in a cluster the workers' clocks are assumed to agree within a small fraction of
the smallest per-host delay (NTP-synchronised machines). Monotonic time measures durations
inside one process.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """A source of wall and monotonic time."""

    def wall_ms(self) -> int:
        """Current Unix time in integer milliseconds."""
        ...

    def monotonic_s(self) -> float:
        """Seconds from an arbitrary fixed point; never goes backwards."""
        ...


class SystemClock:
    """The real clocks: `time.time` and `time.monotonic`."""

    def wall_ms(self) -> int:
        """Current Unix time in integer milliseconds."""
        return int(time.time() * 1000)

    def monotonic_s(self) -> float:
        """`time.monotonic` in seconds."""
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to (tests).

    Args:
        start_ms: Initial Unix time in milliseconds.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._mono_s = 0.0

    def wall_ms(self) -> int:
        """The current manual time in Unix milliseconds."""
        return self._now_ms

    def monotonic_s(self) -> float:
        """Seconds advanced since creation."""
        return self._mono_s

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds`` (float seconds, >= 0)."""
        self._now_ms += round(seconds * 1000)
        self._mono_s += seconds
