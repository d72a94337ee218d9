"""What `crawlq.engine.step.process` needs, built once per worker (`Deps`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crawlq.engine.item_flow import ItemFlow
from crawlq.engine.pagework import PageWork
from crawlq.fetch import Fetcher
from crawlq.frontier import Frontier
from crawlq.links import LinkRules
from crawlq.middleware import Middlewares
from crawlq.robots import RobotsCache
from crawlq.rules.politeness import AutoThrottle, Politeness
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.sitemap import SitemapRules
from crawlq.spider import Spider, sitemap_rules_of

if TYPE_CHECKING:
    from crawlq.store.warc import WarcWriter

__all__ = ["Deps"]


@dataclass(slots=True)
class Deps:
    """What `process` needs, built once per worker.

    Attributes:
        settings: The crawl settings.
        fetcher: The HTTP client.
        robots: robots.txt cache, or None when robots.txt is ignored.
        spider: The user's spider instance.
        scope: Which discovered links to follow.
        frontier: Where host politeness is written (pauses, Crawl-delay).
        politeness: The job's host politeness rules.
        warc: Where each fetched page's request and response are archived, or None.
        throttle: This worker's AutoThrottle state, when the job turns it on.
        pages: The worker's page thread: parsing and spider callbacks run there, off the
            event loop, each with a ``parse_timeout_s`` budget.
        sitemap_rules: The spider's ``sitemap_rules`` and ``sitemap_follow``, compiled from
            ``spider`` (raises `crawlq.errors.ConfigError` when they are wrong).
        link_rules: Which links a page offers its spider (from ``settings``; not an
            argument).
        middlewares: The downloader and spider middlewares of ``settings`` and ``spider``
            (`crawlq.middleware.Middlewares.build`; raises `crawlq.errors.ConfigError`).
        items: The worker's item validation, pipelines and dedup (`ItemFlow`; built from
            ``spider``, ``settings`` and ``frontier`` when not given; kept by
            ``dataclasses.replace``, so a copy shares the pipelines).
    """

    settings: Settings
    fetcher: Fetcher
    robots: RobotsCache | None
    spider: Spider
    scope: Scope
    frontier: Frontier
    politeness: Politeness
    warc: WarcWriter | None = None
    throttle: AutoThrottle | None = None
    pages: PageWork = field(default_factory=PageWork)
    items: ItemFlow | None = None
    sitemap_rules: SitemapRules = field(init=False)
    link_rules: LinkRules = field(init=False)
    middlewares: Middlewares = field(init=False)

    def __post_init__(self) -> None:
        if self.throttle is None and self.politeness.autothrottle:
            self.throttle = AutoThrottle(self.politeness)
        self.sitemap_rules = sitemap_rules_of(self.spider)
        self.link_rules = LinkRules.from_settings(self.settings)
        self.middlewares = Middlewares.build(self.settings, self.spider)
        if self.items is None:
            self.items = ItemFlow(self.spider, self.settings, self.frontier)
