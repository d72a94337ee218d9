"""The Celery engine: crawl with ``scrape.delay(url)`` on Celery workers.

``celery -A crawlq.celery worker --concurrency=4 --loglevel=INFO`` starts workers of the ready
``app``, configured from the ``CRAWLQ_*`` environment (`crawlq.settings.Settings`):
``CRAWLQ_BROKER_URL`` (the broker), ``CRAWLQ_FRONTIER`` (the Redis that holds dedup and
politeness; default the broker when it is Redis), ``CRAWLQ_CELERY_QUEUE``, and for jobs that
nobody seeded with ``crawlq crawl --engine celery`` the job-level settings (``CRAWLQ_STORE``,
``CRAWLQ_SPIDER``, ``CRAWLQ_DELAY_S``...). Then ``scrape.delay(url)`` or
``scrape.apply_async(args=[url], priority=9)`` (higher runs sooner, on every broker).

The ready ``app`` (and its ``scrape`` and ``scrape_many``) is built from the environment on
first use, not at import: importing this package (or a module in it, such as
`crawlq.celery.runtime.state`) reads no settings, imports no Celery and configures nothing.

With an app of your own: ``from crawlq.celery import install; tasks = install(app)`` (see
`install`), or build one with `make_app`. The tasks: `crawlq.celery.tasks`; configuration and
priorities: `crawlq.celery.runtime.config`; what a task does: `crawlq.celery.runtime.jobs`.
Only this package imports celery.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery import Celery

    from crawlq.celery.tasks import CrawlqTask, CrawlqTasks, install, make_app

    app: Celery
    """The ready app, configured from the environment (``celery -A crawlq.celery worker``)."""

    scrape: Any
    """``crawlq.scrape(url, job=None, priority=0, depth=0)`` on `app`."""

    scrape_many: Any
    """``crawlq.scrape_many(job, entries)`` on `app` (what the engine sends itself)."""

__all__ = ["CrawlqTask", "CrawlqTasks", "app", "install", "make_app", "scrape", "scrape_many"]

_FROM_TASKS = ("CrawlqTask", "CrawlqTasks", "install", "make_app")
_READY = ("app", "scrape", "scrape_many")
_lock = threading.Lock()


def __getattr__(name: str) -> Any:
    """Build the ready app on first use of ``app``, ``scrape`` or ``scrape_many``."""
    if name in _FROM_TASKS:
        from crawlq.celery import tasks

        return getattr(tasks, name)
    if name in _READY:
        with _lock:
            ready = globals().get("app")
            if ready is None:
                from crawlq.celery.tasks import make_app

                ready = make_app()
                globals().update(app=ready, scrape=ready.crawlq.scrape)
                globals().update(scrape_many=ready.crawlq.scrape_many)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
