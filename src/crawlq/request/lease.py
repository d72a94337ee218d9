"""`Lease`: a request handed to one worker until a deadline (the frontier contract's unit of work).

Made by the frontier backends (`crawlq.frontier.queue.WorkQueue.lease`); renewed, acked,
retried, dead-lettered or released by the engines. Times are Unix milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawlq.request.crawl_request import CrawlRequest

__all__ = ["Lease"]


@dataclass(frozen=True, slots=True)
class Lease:
    """A request handed to one worker until ``deadline_ms``.

    Attributes:
        lease_id: Opaque id, unique per delivery.
        request: The leased request.
        attempt: 1 for the first delivery, +1 per `Frontier.retry` and per expired lease.
        worker_id: Who holds it.
        deadline_ms: Unix time in milliseconds when the lease returns to the queue unless it is
            renewed or settled (ack, retry, dead, release).
        host_down: The request's host was declared unreachable by its circuit breaker
            (`crawlq.rules.politeness`): dead-letter it as ``host_unreachable`` without a request.
    """

    lease_id: str
    request: CrawlRequest
    attempt: int
    worker_id: str
    deadline_ms: int
    host_down: bool = False
