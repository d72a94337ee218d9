"""`sitemap_rules_of`: a spider's ``sitemap_rules`` and ``sitemap_follow``, compiled and checked.

The rules themselves (Scrapy's ``SitemapSpider`` semantics) live in `crawlq.sitemap`; this
module checks that each callback they name is one a request may name (`is_callback`).
"""

from __future__ import annotations

from crawlq.sitemap import SitemapRules
from crawlq.spider.base import Spider
from crawlq.spider.callbacks import is_callback

__all__ = ["sitemap_rules_of"]


def sitemap_rules_of(spider: Spider) -> SitemapRules:
    """The spider's ``sitemap_rules`` and ``sitemap_follow``, compiled and checked.

    Raises:
        ConfigError: Named ``spider``: a bad regex, or a callback that is not a public method.
    """
    return SitemapRules.compile(
        spider.sitemap_rules, spider.sitemap_follow, lambda name: is_callback(spider, name)
    )
