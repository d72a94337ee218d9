"""Open a crawl's frontier and store from its settings, binding a shared job's settings."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from crawlq.engine.job import bind_job
from crawlq.engine.step import Deps
from crawlq.engine.worker import Worker
from crawlq.errors import ConfigError
from crawlq.fetch import Fetcher
from crawlq.frontier import Frontier, HostPolicy, open_frontier
from crawlq.robots import RobotsCache
from crawlq.scope import Scope
from crawlq.settings import Settings
from crawlq.spider import Spider
from crawlq.store import Store, open_store

__all__ = ["Backends", "assembled_worker", "open_backends"]


@dataclass(frozen=True, slots=True)
class Backends:
    """An open frontier and store, and the settings they were opened with.

    Attributes:
        frontier: The crawl frontier (embedded SQLite, or a shared Redis job).
        store: The result store.
        settings: The settings in force: on a shared frontier, the job's values of the
            job-level fields (see `crawlq.engine.job`).
    """

    frontier: Frontier
    store: Store
    settings: Settings


@contextlib.asynccontextmanager
async def open_backends(settings: Settings, *, create: bool = False) -> AsyncIterator[Backends]:
    """Open the frontier and the store of ``settings``, and close both on exit.

    ``settings.frontier`` None means the embedded frontier in ``settings.store``'s file.
    ``create`` (producers: seed, crawl) creates a shared job that does not exist yet and
    stores its settings; without it (workers) a job that was never seeded is an error.

    Raises:
        ConfigError: A shared frontier without a job name, or settings that conflict with the
            job's.
        FrontierLocked, FrontierUnavailable, StoreError: A backend cannot be opened.
    """
    policy = HostPolicy(settings.delay_s, settings.host_concurrency)
    if "://" not in settings.store:
        folder = Path(settings.store).parent
        if not folder.is_dir():
            raise ConfigError("store", f"{settings.store}: directory {folder} does not exist")
    if settings.frontier is None:
        if "://" in settings.store and not settings.store.startswith("sqlite:"):
            raise ConfigError(
                "frontier",
                f"the store {settings.store.split('@')[-1]} cannot hold the frontier: give "
                "--frontier (a SQLite file path, or redis://…)",
            )
        frontier = await open_frontier(settings.store, default_policy=policy)
    else:
        if not settings.job:
            raise ConfigError("job", "a shared frontier needs a job name (--job NAME)")
        bloom = None
        if settings.bloom_capacity is not None:
            from crawlq.frontier.redis import BloomDedup

            bloom = BloomDedup(settings.bloom_capacity, settings.bloom_error_rate)
        url = settings.frontier
        if not url.startswith(("redis://", "rediss://", "unix://", "sqlite:///")) and not (
            url.endswith((".db", ".sqlite", ".sqlite3"))
        ):
            raise ConfigError(
                "frontier", f"{url!r}: expected redis://host:port/DB or a SQLite file (*.db)"
            )
        frontier = await open_frontier(
            url, job=settings.job, default_policy=policy, bloom=bloom, create=create
        )
    try:
        if settings.frontier is not None:
            settings = await bind_job(frontier, settings, create=create)
            frontier.default_policy = HostPolicy(settings.delay_s, settings.host_concurrency)
        store = await open_store(settings.store)
        try:
            yield Backends(frontier, store, settings)
        finally:
            await store.close()
    finally:
        await frontier.close()


@contextlib.asynccontextmanager
async def assembled_worker(
    backends: Backends,
    spider: Spider,
    scope: Scope,
    *,
    exit_when_done: bool = True,
    page_budget: int | None = None,
) -> AsyncIterator[Worker]:
    """A `Worker` wired to ``backends`` with its own fetcher and robots.txt cache.

    The fetcher is closed on exit. Both engines' entry points (`crawlq.engine.crawl.Crawl`
    and `crawlq.engine.service.WorkerService`) build their worker here.
    """
    s = backends.settings
    async with Fetcher(
        user_agent=s.user_agent,
        timeout_s=s.timeout_s,
        connect_timeout_s=s.connect_timeout_s,
        max_body_bytes=s.max_body_bytes,
        max_redirects=s.max_redirects,
        max_connections=s.concurrency,
    ) as fetcher:
        robots = RobotsCache(fetcher, s.user_agent) if s.obey_robots else None
        deps = Deps(s, fetcher, robots, spider, scope, backends.frontier)
        yield Worker(
            backends.frontier,
            backends.store,
            deps,
            exit_when_done=exit_when_done,
            page_budget=page_budget,
        )
