r"""The ``pending``, ``dead_requests`` and ``running`` entries of a Celery-engine job, decoded.

``pending`` and ``dead_requests`` values are ``owner "\n" request JSON``; a ``running`` value
is the 20-byte fingerprints of a task's URLs, concatenated. The keys are shared state: a value
that does not decode is skipped (or its request is None), never an error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from crawlq.frontier.redis.replies import reply_text
from crawlq.request import CrawlRequest

__all__ = ["owner_and_request", "packed_fingerprints", "pending_requests"]


def owner_and_request(value: Any) -> tuple[str | None, CrawlRequest | None]:
    r"""The owner and request of a ``pending`` value (``owner "\n" request JSON``), leniently."""
    if value is None:
        return None, None
    raw = value.encode() if isinstance(value, str) else bytes(value)
    owner, _, text = raw.partition(b"\n")
    try:
        return reply_text(owner), CrawlRequest.from_json(text)
    except ValueError:  # shared state: whoever can write the key may write anything
        return reply_text(owner), None


def packed_fingerprints(packed: bytes) -> list[bytes]:
    """The 20-byte fingerprints of a ``running`` entry."""
    return [packed[i : i + 20] for i in range(0, len(packed) - 19, 20)]


def pending_requests(values: Sequence[Any]) -> list[CrawlRequest]:
    r"""The requests of ``pending`` values (``owner "\n" request JSON``); others skipped."""
    out = []
    for value in values:
        with contextlib.suppress(ValueError, IndexError, TypeError, AttributeError):
            raw = value.encode() if isinstance(value, str) else value
            out.append(CrawlRequest.from_json(raw.split(b"\n", 1)[1]))
    return out
