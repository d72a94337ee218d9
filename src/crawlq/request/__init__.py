"""Plain value types that move between layers: requests, leases and fetch results.

Priority semantics (docs/architecture.md invariant 5): a *higher* ``priority`` is served sooner;
equal priorities are served first in, first out. When a spider does not choose a priority,
a followed link gets ``priority = -depth`` (see `crawlq.spider.Response.follow`), so index
pages near the seeds run before leaf pages.

Where each part is written (import them from here):

* `crawlq.request.crawl_request`: `CrawlRequest`, the value; its JSON form
  (`CrawlRequest.to_json`, `CrawlRequest.from_json`); `PRIORITY_LIMIT`, `MAX_DEPTH` and the
  bounds of a JSON request; form data as a body or query (`CrawlRequest.form`).
* `crawlq.request.in_flight`: `Lease` (a request handed to one worker), `FetchResult` and
  `RawExchange` (what fetching it returns).
"""

from crawlq.request.crawl_request import (
    MAX_DEPTH,
    MAX_JSON_NESTING,
    MAX_REFERRER_CHARS,
    MAX_URL_LENGTH,
    PRIORITY_LIMIT,
    CrawlRequest,
)
from crawlq.request.in_flight import FetchResult, Lease, RawExchange

__all__ = [
    "MAX_DEPTH",
    "MAX_JSON_NESTING",
    "MAX_REFERRER_CHARS",
    "MAX_URL_LENGTH",
    "PRIORITY_LIMIT",
    "CrawlRequest",
    "FetchResult",
    "Lease",
    "RawExchange",
]
