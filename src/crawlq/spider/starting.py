"""A spider made and its start requests read, with the user's errors as one clear message.

A spider's ``__init__`` and ``start_requests`` are the user's code, run before a crawl (or
``crawlq parse``/``shell``) opens anything. An exception there is a mistake in the spider,
not a crash of crawlq: `new_spider` and `start_requests_of` turn it into a `ConfigError`
named ``spider`` whose message names the spider class, the method and the exception, so a
command prints it as one line (exit 2, as for a spider file that cannot be imported). The
traceback goes to the ``crawlq.spider`` logger at DEBUG (``-vv``).
"""

from __future__ import annotations

import logging

from crawlq.errors import ConfigError, InvalidURL
from crawlq.request import CrawlRequest
from crawlq.spider.base import Spider

__all__ = ["new_spider", "start_requests_of"]

logger = logging.getLogger("crawlq.spider")


def new_spider(spider_cls: type[Spider]) -> Spider:
    """``spider_cls()``.

    Raises:
        ConfigError: Named ``spider``: the constructor raised (``MySpider() raised
            KeyError: 'API_KEY'``); the exception is the ``__cause__``.
    """
    try:
        return spider_cls()
    except ConfigError:
        raise
    except Exception as exc:
        raise _spider_error(f"{spider_cls.__name__}()", exc) from exc


def start_requests_of(spider: Spider) -> list[CrawlRequest]:
    """``list(spider.start_requests())``.

    Raises:
        InvalidURL: A start URL cannot be crawled (the caller names the seed).
        ConfigError: Named ``spider``: ``start_requests`` raised anything else
            (``MySpider.start_requests raised ValueError: …``); the exception is the
            ``__cause__``.
    """
    try:
        return list(spider.start_requests())
    except (ConfigError, InvalidURL):
        raise
    except Exception as exc:
        raise _spider_error(f"{type(spider).__name__}.start_requests", exc) from exc


def _spider_error(where: str, exc: Exception) -> ConfigError:
    logger.debug("%s raised", where, exc_info=exc)
    return ConfigError("spider", f"{where} raised {type(exc).__name__}: {exc}")
