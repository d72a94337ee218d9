"""A spider made and its start requests read, with the user's errors as one clear message.

A spider's ``__init__`` and ``start_requests`` are the user's code, run before a crawl (or
``crawlq parse``/``shell``) opens anything. An exception there is a mistake in the spider,
not a crash of crawlq: `new_spider` and `start_requests_of` turn it into a `ConfigError`
named ``spider`` whose message names the spider class, the method and the exception, so a
command prints it as one line (exit 2, as for a spider file that cannot be imported). The
traceback goes to the ``crawlq.spider`` logger at DEBUG (``-vv``).
"""

from __future__ import annotations

import inspect
import logging

from crawlq.errors import ConfigError, InvalidURL
from crawlq.request import CrawlRequest
from crawlq.spider.base import Spider

__all__ = ["CLOSE_REASONS", "new_spider", "spider_closed", "start_requests_of"]

CLOSE_REASONS = {"done": "finished", "max_pages": "closespider_pagecount", "stopped": "shutdown"}
"""A worker's ``stopped_by`` -> the reason its spider's ``closed(reason)`` is given: Scrapy's
names (``finished``, ``closespider_pagecount``, ``shutdown``)."""

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


async def spider_closed(spider: Spider, reason: str) -> None:
    """Call ``spider.closed(reason)`` when the spider defines it, as Scrapy does at its end.

    ``closed`` may be a plain method or ``async def``. Once per worker process, after its item
    pipelines are closed; what it raises is logged (ERROR, with the traceback), not raised:
    the crawl has ended already.
    """
    closed = getattr(spider, "closed", None)
    if not callable(closed):
        return
    try:
        done = closed(reason)
        if inspect.isawaitable(done):
            await done
    except Exception:
        logger.exception("%s.closed(%r) raised", type(spider).__name__, reason)


def _spider_error(where: str, exc: Exception) -> ConfigError:
    logger.debug("%s raised", where, exc_info=exc)
    return ConfigError("spider", f"{where} raised {type(exc).__name__}: {exc}")
