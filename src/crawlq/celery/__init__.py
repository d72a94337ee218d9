"""The Celery engine: crawl with ``scrape.delay(url)`` on Celery workers.

``celery -A crawlq.celery worker --concurrency=4 --loglevel=INFO`` starts workers of the ready
``app`` below, configured from the ``CRAWLQ_*`` environment (`crawlq.settings.Settings`):
``CRAWLQ_BROKER_URL`` (the broker), ``CRAWLQ_FRONTIER`` (the Redis that holds dedup and
politeness; default the broker when it is Redis), ``CRAWLQ_CELERY_QUEUE``, and for jobs that
nobody seeded with ``crawlq crawl --engine celery`` the job-level settings (``CRAWLQ_STORE``,
``CRAWLQ_SPIDER``, ``CRAWLQ_DELAY_S``...). Then ``scrape.delay(url)`` or
``scrape.apply_async(args=[url], priority=9)`` (higher runs sooner, on every broker).

With an app of your own: ``from crawlq.celery import install; tasks = install(app)`` (see
`install`), or build one with `make_app`. Configuration and priorities: `crawlq.celery.config`;
what a task does: `crawlq.celery.runtime`. Only this package imports celery.
"""

from __future__ import annotations

from typing import Any

from crawlq.celery.app import CrawlqTask, CrawlqTasks, install, make_app

__all__ = ["CrawlqTask", "CrawlqTasks", "app", "install", "make_app", "scrape", "scrape_many"]

app = make_app()
"""The ready app, configured from the environment (``celery -A crawlq.celery worker``)."""

scrape: Any = app.crawlq.scrape
"""``crawlq.scrape(url, job=None, priority=0, depth=0)`` on `app`."""

scrape_many: Any = app.crawlq.scrape_many
"""``crawlq.scrape_many(job, entries)`` on `app` (what the engine sends itself)."""
