"""Retry policy as pure functions: classify a failure, compute a backoff, read Retry-After.

The worker loop asks; these functions decide (docs/architecture.md "Failure model"):

* transient (retry with backoff and jitter, Retry-After honoured): connect/read timeout,
  connection reset, DNS failure, HTTP 408, 429 and 5xx;
* permanent (recorded, never retried): every other failure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

from crawlq.errors import FetchError, RetryableStatus

__all__ = ["Decision", "backoff_s", "decide", "is_retryable_status", "parse_retry_after"]


def is_retryable_status(status: int) -> bool:
    """True for the HTTP statuses worth retrying: 408, 429 and 5xx."""
    return status in (408, 429) or 500 <= status <= 599


def backoff_s(attempt: int, base_s: float, cap_s: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` ("equal jitter" exponential backoff).

    The wait is drawn uniformly from ``[d/2, d]`` where ``d = min(cap_s, base_s * 2**(attempt-1))``:
    half of ``d`` is kept and the other half is jittered (AWS's "equal jitter"; "full jitter"
    would draw from ``[0, d]``). Retries of many URLs that failed together spread out instead
    of returning at once, while each wait still grows with the attempt and is never short.

    Args:
        attempt: 1 for the first retry, 2 for the second, ...
        base_s: Seconds of the first backoff before jitter.
        cap_s: Largest wait in seconds.
        rng: Source of randomness (tests pass a seeded one).

    Returns:
        Seconds, between ``d/2`` and ``d``.
    """
    exp = min(cap_s, base_s * 2.0 ** max(0, attempt - 1))
    r = rng.random() if rng is not None else random.random()
    return exp / 2 + r * exp / 2


_RETRY_AFTER_MAX_S = 2.0**31
"""Largest Retry-After returned, in seconds (68 years): far above any cap, still finite."""


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """Parse an HTTP ``Retry-After`` header (RFC 9110 §10.2.3) into seconds from ``now_s``.

    Args:
        value: The header: ``delay-seconds`` (``"120"``) or an HTTP-date
            (``"Fri, 31 Dec 1999 23:59:59 GMT"``); None or garbage gives None.
        now_s: Current Unix time in seconds, for HTTP-dates.

    Returns:
        Seconds to wait, at least 0, or None when the header is absent or unparsable.
    """
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():  # not "²" or "٣": isdigit() alone takes them
        return min(float(text), _RETRY_AFTER_MAX_S)  # float(): no int() of 5,000 digits
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return min(max(0.0, when.timestamp() - now_s), _RETRY_AFTER_MAX_S)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a failed fetch.

    Attributes:
        retry: True to retry after ``delay_s`` seconds; False to dead-letter now.
        delay_s: Seconds before the retry (0 when not retrying).
        reason: Short code of the failure (``timeout``, ``http_503``).
        detail: Human-readable description.
    """

    retry: bool
    delay_s: float
    reason: str
    detail: str


def decide(
    error: FetchError,
    attempt: int,
    *,
    max_retries: int,
    base_s: float,
    cap_s: float,
    rng: random.Random | None = None,
) -> Decision:
    """Decide between retrying and dead-lettering a failed fetch.

    Args:
        error: The classified failure from the fetcher.
        attempt: Which delivery failed (1 = first try).
        max_retries: Retries allowed after the first try.
        base_s: Backoff base in seconds (see `backoff_s`).
        cap_s: Largest wait in seconds; a longer Retry-After is capped to it.
        rng: Source of jitter.

    Returns:
        A `Decision`; a server's Retry-After wins over a shorter backoff.
    """
    detail = str(error)
    if not error.transient or attempt > max_retries:
        return Decision(False, 0.0, error.reason, detail)
    delay = backoff_s(attempt, base_s, cap_s, rng)
    if isinstance(error, RetryableStatus) and error.retry_after_s is not None:
        delay = max(delay, min(cap_s, error.retry_after_s))
    return Decision(True, delay, error.reason, detail)
