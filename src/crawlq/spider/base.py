"""`Spider`: the base class of crawlq spiders, with the attributes a Scrapy user expects.

The base follows every link of every page (`Spider.parse`) and yields no items. Its attributes
(``start_urls``, ``allowed_domains``, ``custom_settings``, ``handle_httpstatus_list``, the
sitemap ones) are read by the engine; its own methods are never callbacks a request may name
(`crawlq.spider.callbacks`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from crawlq.request import CrawlRequest
from crawlq.sitemap import sitemap_request

if TYPE_CHECKING:  # the response module imports this one
    from crawlq.spider.response import Response

__all__ = ["Spider"]


class Spider:
    """Base class of crawlq spiders; the base itself follows every link and yields no items.

    Subclass it, set `start_urls`, and write callbacks that take a `Response` and return or
    yield ``dict`` items and `CrawlRequest` objects (see `run_callback` for every accepted
    shape). Keyword arguments to the constructor become instance attributes (the CLI sets
    ``start_urls`` this way), so class-level lists are never mutated.

    Attributes:
        name: Spider name, recorded with every page it parses.
        start_urls: Seed URLs for `start_requests`.
        allowed_domains: Hosts (and their subdomains) whose links the engine follows;
            empty means the seeds' hosts.
        custom_settings: Settings overriding the settings file, below environment and CLI
            (`crawlq.settings.Settings.build`).
        handle_httpstatus_list: Non-2xx statuses that still reach the callbacks.
        sitemap_urls: Sitemaps to read at the start (`crawlq.sitemap`; robots.txt
            ``Sitemap:`` lines are read with the ``follow_sitemaps`` setting).
        sitemap_rules: ``(regex, callback)`` pairs, as Scrapy's ``SitemapSpider``: a URL a
            sitemap lists goes to the callback of the first regex found in it (``re.search``),
            and is skipped when none is; a callback is a public method's name. Empty: every
            URL, to ``parse``.
        sitemap_follow: Regexes of the child sitemaps (of an index or robots.txt) to read;
            empty: all.
        downloader_middlewares: Downloader middlewares (classes, instances or
            ``module:Class`` paths) run after the ``downloader_middlewares`` setting's
            (`crawlq.middleware`).
        spider_middlewares: Spider middlewares, likewise after the setting's.
        item_type: The declared item class (dataclass, attrs, pydantic or ``TypedDict``)
            that dict items are validated against (`crawlq.items.validate`); None: none.
        item_pipelines: Item pipelines (classes, or ``module:Class`` / ``file.py:Class``)
            run before those of the ``item_pipelines`` setting
            (`crawlq.engine.item_flow`).
    """

    name: str = "default"
    start_urls: list[str] = []
    allowed_domains: list[str] = []
    custom_settings: dict[str, Any] = {}
    handle_httpstatus_list: list[int] = []
    sitemap_urls: list[str] = []
    sitemap_rules: list[tuple[str, Any]] = []
    sitemap_follow: list[str] = []
    downloader_middlewares: Sequence[Any] = ()
    spider_middlewares: Sequence[Any] = ()
    item_type: Any = None
    item_pipelines: Sequence[Any] = ()

    def __init__(self, **kwargs: Any) -> None:
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger named after the spider (``logging.getLogger(self.name)``), as Scrapy's.

        A `logging.LoggerAdapter` whose records carry the spider as ``extra={"spider":
        self}``: ``self.logger.info("found %d rows", n)`` in a callback logs through the
        worker's own logging configuration (``-v``, ``--log-format``).
        """
        return logging.LoggerAdapter(logging.getLogger(self.name), {"spider": self})

    def start_requests(self) -> Iterable[CrawlRequest]:
        """Yield the seed requests: one per `start_urls` entry, depth 0, priority 0.

        Then a sitemap request (`crawlq.sitemap.sitemap_request`) per `sitemap_urls` entry.
        Override to seed with other methods, callbacks or priorities.

        Raises:
            InvalidURL: A start URL is not an http(s) URL with a host.
        """
        for url in self.start_urls:
            yield CrawlRequest(url=url, depth=0, priority=0)
        for url in self.sitemap_urls:
            yield sitemap_request(url)

    def parse(self, response: Response) -> Any:
        """Default callback: follow every link of the page (`Response.follow_all`).

        Under ``obey_robots`` (the default) that leaves out ``rel="nofollow"`` links and the
        links of a page whose ``<meta name="robots">`` says ``nofollow`` or ``none``;
        override ``parse`` with ``yield from response.follow_all(response.links())`` to
        follow them anyway.

        Args:
            response: The fetched page.

        Returns:
            Items and requests in any shape `run_callback` accepts.
        """
        yield from response.follow_all()

    def wants_status(self, status: int) -> bool:
        """Return whether a response with ``status`` is passed to a callback.

        Args:
            status: HTTP status of the final response.

        Returns:
            True for 2xx and for statuses in `handle_httpstatus_list`.
        """
        return 200 <= status < 300 or status in self.handle_httpstatus_list
