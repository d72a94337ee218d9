"""The Scrapy side of the comparison: a CrawlSpider over the seed's host(s), one item per page.

    scrapy runspider bench/scrapy_spider.py -a start_url=http://127.0.0.1:8000/index.html \
        [-a hosts=127.0.0.1,127.0.0.2] -O pages.jsonl

``hosts`` (default: the start URL's host) all serve on the start URL's port. Scrapy's
LinkExtractor matches ``allow_domains`` against the netloc (port included) and its offsite
middleware matches ``allowed_domains`` against the host name, so the spider gives each its form.
Settings are in ``custom_settings`` (concurrency 16 overall and per domain, robots.txt off,
AutoThrottle off, log level INFO); everything else is Scrapy's default. Each response yields
``{url, status, title}`` to the feed, including the start page.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class BenchSpider(CrawlSpider):
    name = "bench"
    custom_settings = {
        "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
        "ROBOTSTXT_OBEY": False,
        "AUTOTHROTTLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
    }

    def __init__(self, start_url: str, hosts: str = "", *args: Any, **kwargs: Any) -> None:
        seed = urlsplit(start_url)
        allowed = [h for h in hosts.split(",") if h] or [seed.hostname or ""]
        netlocs = [f"{h}:{seed.port}" if seed.port else h for h in allowed]
        self.start_urls = [start_url]
        self.allowed_domains = allowed
        self.rules = (
            Rule(LinkExtractor(allow_domains=netlocs), callback="parse_item", follow=True),
        )
        super().__init__(*args, **kwargs)

    def parse_start_url(self, response: Response, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield from self.parse_item(response)

    def parse_item(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get(),
        }
