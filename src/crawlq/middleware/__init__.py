"""Downloader and spider middlewares: user code around each fetch and each callback's output.

A **downloader middleware** is any object (or class, instantiated with no arguments) with
some of these methods, each a plain function or an ``async def``:

* ``process_request(request) -> CrawlRequest | FetchResult | None``: before the fetch, in
  order. None: go on. A request for the **same URL** replaces the one fetched (other
  headers, cookies, method or body); a request for **another URL** is queued as a new request
  through the frontier (scope, dedup, robots.txt and the private-address guard apply to it)
  and this URL ends as a filtered record ``middleware_request``. A response (a
  `crawlq.request.FetchResult`, `response`) skips the fetch: it is the page.
* ``process_response(request, response) -> FetchResult | CrawlRequest``: after the fetch, in
  reverse order. A response replaces the page; a request for the same URL is a retry of
  this one (counted, with backoff, dead-lettered after ``max_retries``), one for another
  URL is queued as above.
* ``process_exception(request, exc) -> FetchResult | CrawlRequest | None``: when the fetch
  failed (a `crawlq.errors.FetchError`: timeout, 5xx...), in reverse order. None: the retry
  policy decides as without middlewares; a response or a request as above.

Any of them may raise `Retry` (``raise Retry("soft_404")``): the retry policy takes it as a
transient failure. A **spider middleware** has ``process_spider_output(response, results)``
returning an iterable (or an async iterable) of items and requests: what a callback yielded,
filtered or enriched (`Middlewares.spider_output`).

Configure them with the ``downloader_middlewares`` / ``spider_middlewares`` settings
(``--downloader-middleware SPEC``, ``--spider-middleware SPEC``, repeatable; the settings
file; ``CRAWLQ_DOWNLOADER_MIDDLEWARES``) and/or the spider class's attributes of the same
names. The engine's policy runs outside them (`crawlq.engine.step`).
"""

from crawlq.errors import Retry
from crawlq.middleware.chain import Middlewares, SpiderOutputRun, response

__all__ = ["Middlewares", "Retry", "SpiderOutputRun", "response"]
