"""Time sources. Every frontier step takes "now" from one `Clock`, so tests can stop time.

Wall time (Unix milliseconds) orders leases, retries and politeness windows and is shared by
every worker: in a cluster the workers' clocks are assumed to agree within a small fraction of
the smallest per-host delay (NTP-synchronised machines). Monotonic time measures durations
inside one process.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "Every", "ManualClock", "SystemClock"]


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


class Every:
    """Says when a lasting state is worth another log line: at once, then once per period.

    A worker on a Redis at its ``maxmemory`` logs that state once a minute instead of once per
    refused write (`crawlq.engine.outage.FullFrontier`).

    Args:
        period_s: Seconds between two ``True`` answers of `due` (> 0).
        clock: Where the monotonic time comes from (default `SystemClock`).
    """

    def __init__(self, period_s: float, clock: Clock | None = None) -> None:
        self.period_s = period_s
        self.clock: Clock = clock or SystemClock()
        self._last_s: float | None = None

    def due(self) -> bool:
        """True the first time and when ``period_s`` passed since the last True (then reset)."""
        now = self.clock.monotonic_s()
        if self._last_s is not None and now - self._last_s < self.period_s:
            return False
        self._last_s = now
        return True

    def reset(self) -> None:
        """Forget the last True: the next `due` is True (the state ended and may come back)."""
        self._last_s = None
