"""`Failure`: what a request's errback receives when the request failed.

A request names its errback (``CrawlRequest(errback="on_error")``, ``response.follow(...,
errback=self.on_error)``) under the same rule as a callback (`crawlq.spider.callbacks`: a
public method of the spider). The engine calls it as ``errback(failure)``:

* when the request ends as a dead letter (retries of a 5xx or a connection failure spent,
  ``host_unreachable``, ``too_many_redirects``, ``body_too_large``...): ``reason`` is the
  dead letter's reason, ``detail`` its detail, ``response`` None;
* when a response has a status outside 2xx and 3xx that the spider does not handle
  (`crawlq.spider.Spider.wants_status`, ``handle_httpstatus_list``): ``reason`` is
  ``http_<status>`` and ``response`` the `Response` (its body, headers, links).

An errback may return or yield items and requests exactly as a callback: items are stored
for the request's URL, requests go through scope and dedup like a callback's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crawlq.request import CrawlRequest
from crawlq.spider.response import Response

__all__ = ["Failure"]


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a request failed, as its errback sees it.

    Attributes:
        request: The request that failed (its ``meta``, ``cb_kwargs``, URL).
        reason: A short code: a dead-letter reason (``connect_error``, ``timeout``,
            ``host_unreachable``...) or ``http_<status>``.
        detail: The failure's detail, as stored with a dead letter ("" for a status).
        response: The response for an ``http_<status>`` failure, else None.
    """

    request: CrawlRequest
    reason: str
    detail: str = ""
    response: Response | None = None

    @property
    def url(self) -> str:
        """The request's URL."""
        return self.request.url

    @property
    def meta(self) -> Mapping[str, Any]:
        """The request's ``meta``."""
        return self.request.meta
