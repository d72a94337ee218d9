"""Replies read back from Redis, decoded leniently: the job's keys are shared state.

Whoever can write a job's keys may have written anything there, so a reply that does not
decode becomes a replacement character, None or a skipped entry here, never an exception.
"""

from __future__ import annotations

from typing import Any

from crawlq.request import CrawlRequest

__all__ = ["reply_int", "reply_request", "reply_text"]


def reply_text(value: bytes | str) -> str:
    """A reply from a Redis of ``decode_responses=False`` as text (undecodable bytes replaced)."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def reply_int(value: Any) -> int | None:
    """A stored integer (or score), or None when missing or not a number."""
    if value is None:
        return None
    try:
        return round(float(value))
    except (TypeError, ValueError, OverflowError):
        return None


def reply_request(value: bytes) -> CrawlRequest | None:
    """A stored request JSON, or None when it does not decode."""
    try:
        return CrawlRequest.from_json(value)
    except ValueError:
        return None
