"""The user-facing spider API: `Spider`, `Response` and the helpers the engine calls.

A Scrapy user will recognise it::

    class DocsSpider(Spider):
        name = "docs"
        start_urls = ["https://example.org/docs/"]

        def parse(self, response):
            yield {"title": response.css("title::text").get(), "url": response.url}
            yield from response.follow_all()

A callback receives a `Response` and returns (or yields) items (``dict``) and requests
(`CrawlRequest`, usually made with `Response.follow`). Requests cross processes as JSON, so a
callback is stored by its method *name* and ``meta``/``cb_kwargs`` must be JSON-serialisable.

The engine uses `load_spider` to find the class, `Spider.start_requests` to seed,
`Spider.wants_status` to decide whether a response reaches a callback, and `run_callback`
to call it. The spider follows whatever it yields; domains, depth and robots.txt are
applied later by the engine (`crawlq.rules.scope`), not here.

Where each part is written (import them from here):

* `crawlq.spider.spider`: `Spider`, the base class; which method a request's callback may
  name (`is_callback`); the spider's sitemap rules, checked (`sitemap_rules_of`);
  `new_spider` and `start_requests_of`, the user's errors in ``__init__``/``start_requests``
  as one `ConfigError` line; `spider_closed`, Scrapy's ``closed(reason)`` called at a
  worker's end.
* `crawlq.spider.response`: `Response`, the page a callback gets, and its ``follow``.
* `crawlq.spider.callbacks`: calling a callback and collecting its output (`run_callback`),
  an errback (`start_errback`) and `Failure`, what an errback gets.
* `crawlq.spider.forms`: `FormRequest.from_response`, a page's form submitted.
* `crawlq.spider.loading`: `load_spider`, from a ``module:Class`` or ``file.py:Class`` path
  (`spider_file`: the file such a path names).
* `crawlq.spider.item_type`: the declared item type and the typed items table it gives.
* `crawlq.errors`: `SpiderError`, re-exported here.
* `crawlq.request`: `CrawlRequest`, re-exported here (Scrapy users import ``Request`` from
  ``scrapy``; ``from crawlq.spider import CrawlRequest`` works too).
"""

from crawlq.errors import SpiderError
from crawlq.request import CrawlRequest
from crawlq.spider.callbacks import (
    CallbackRun,
    Failure,
    run_callback,
    start_callback,
    start_errback,
)
from crawlq.spider.forms import FormRequest
from crawlq.spider.loading import load_object, load_spider, spider_file
from crawlq.spider.response import Response
from crawlq.spider.spider import (
    CLOSE_REASONS,
    Spider,
    is_callback,
    new_spider,
    sitemap_rules_of,
    spider_closed,
    start_requests_of,
)

__all__ = [
    "CLOSE_REASONS",
    "CallbackRun",
    "CrawlRequest",
    "Failure",
    "FormRequest",
    "Response",
    "Spider",
    "SpiderError",
    "is_callback",
    "load_object",
    "load_spider",
    "new_spider",
    "run_callback",
    "sitemap_rules_of",
    "spider_closed",
    "spider_file",
    "start_callback",
    "start_errback",
    "start_requests_of",
]
