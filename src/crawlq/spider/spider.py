"""`Spider`: the base class of crawlq spiders, the methods a request may name, and its start.

The base follows every link of every page (`Spider.parse`) and yields no items. Its attributes
(``start_urls``, ``allowed_domains``, ``custom_settings``, ``handle_httpstatus_list``, the
sitemap ones) are read by the engine.

Callbacks. A request's callback comes from shared state (an inbox entry, a task message:
docs/architecture.md invariant 7), so only a public method of the spider may be named
(`is_callback`, `callback_method`): not a private or special name (``_helper``,
``__init__``) nor one of the base class's own methods (``start_requests``). Requests cross
processes as JSON, so a callback is stored by its method *name* (`callback_name`). The
spider's ``sitemap_rules`` name callbacks under the same rule (`sitemap_rules_of`; the rules
themselves, Scrapy's ``SitemapSpider`` semantics, live in `crawlq.sitemap`).

Start and end. A spider's ``__init__`` and ``start_requests`` are the user's code, run before
a crawl (or ``crawlq parse``/``shell``) opens anything. An exception there is a mistake in the
spider, not a crash of crawlq: `new_spider` and `start_requests_of` turn it into a
`ConfigError` named ``spider`` whose message names the spider class, the method and the
exception, so a command prints it as one line (exit 2, as for a spider file that cannot be
imported). The traceback goes to the ``crawlq.spider`` logger at DEBUG (``-vv``).
`spider_closed` calls Scrapy's ``closed(reason)`` at a worker's end.

This module does not import `crawlq.spider.response` (the response imports it, to store a
callback by name), so `Spider.parse` takes its `crawlq.spider.Response` untyped.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from crawlq.errors import ConfigError, InvalidURL, SpiderError
from crawlq.request import CrawlRequest
from crawlq.sitemap import SitemapRules, sitemap_request

__all__ = [
    "CLOSE_REASONS",
    "Spider",
    "callback_method",
    "callback_name",
    "is_callback",
    "new_spider",
    "sitemap_rules_of",
    "spider_closed",
    "start_requests_of",
]


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

    def parse(self, response: Any) -> Any:
        """Default callback: follow every link of the page (`Response.follow_all`).

        Under ``obey_robots`` (the default) that leaves out ``rel="nofollow"`` links and the
        links of a page whose ``<meta name="robots">`` says ``nofollow`` or ``none``;
        override ``parse`` with ``yield from response.follow_all(response.links())`` to
        follow them anyway.

        Args:
            response: The fetched page (a `crawlq.spider.Response`).

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


_NOT_CALLBACKS = frozenset(n for n in vars(Spider) if n != "parse")
"""The base class's own names other than ``parse`` (``start_requests``, ``wants_status``…)."""


def is_callback(spider: Spider, name: str) -> bool:
    """Whether a request may name ``name`` as its callback on ``spider`` (public methods)."""
    try:
        callback_method(spider, name, "")
    except SpiderError:
        return False
    return True


def callback_method(spider: Spider, name: str, url: str) -> Callable[..., Any]:
    """The spider method a request names as its callback: a public method only (see above).

    Args:
        spider: The spider instance.
        name: The callback name the request carries.
        url: The request's URL, for the error message.

    Raises:
        SpiderError: No such callback.
    """
    method: object = None
    if not name.startswith("_") and name not in _NOT_CALLBACKS:
        method = getattr(spider, name, None)
    if not callable(method):
        raise SpiderError(
            url,
            name,
            f"spider {type(spider).__name__} has no callback {name!r}",
            kind="MissingCallback",
        )
    return method


def callback_name(callback: Callable[..., Any] | str | None) -> str | None:
    """The name under which a callback is stored in a request (requests are JSON)."""
    if callback is None or isinstance(callback, str):
        return callback
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, Spider):
        return str(callback.__name__)
    raise TypeError(
        f"callback must be a spider method or its name, got {callback!r}; "
        "requests are JSON, so a callback is stored by name"
    )


def sitemap_rules_of(spider: Spider) -> SitemapRules:
    """The spider's ``sitemap_rules`` and ``sitemap_follow``, compiled and checked.

    Raises:
        ConfigError: Named ``spider``: a bad regex, or a callback that is not a public method.
    """
    return SitemapRules.compile(
        spider.sitemap_rules, spider.sitemap_follow, lambda name: is_callback(spider, name)
    )


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
