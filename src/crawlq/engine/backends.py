"""Open a crawl's frontier and store from its settings, binding a shared job's settings."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from crawlq.engine.job import bind_job
from crawlq.errors import ConfigError
from crawlq.frontier import Frontier, HostPolicy, open_frontier
from crawlq.settings import Settings
from crawlq.store import Store, open_store

__all__ = ["Backends", "open_backends"]


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
async def open_backends(settings: Settings) -> AsyncIterator[Backends]:
    """Open the frontier and the store of ``settings``, and close both on exit.

    ``settings.frontier`` None means the embedded frontier in ``settings.store``'s file.

    Raises:
        ConfigError: A shared frontier without a job name, or settings that conflict with the
            job's.
        FrontierLocked, FrontierUnavailable, StoreError: A backend cannot be opened.
    """
    policy = HostPolicy(settings.delay_s, settings.host_concurrency)
    if settings.frontier is None:
        frontier = await open_frontier(settings.store, default_policy=policy)
    else:
        if not settings.job:
            raise ConfigError("job", "a shared frontier needs a job name (--job NAME)")
        frontier = await open_frontier(settings.frontier, job=settings.job, default_policy=policy)
    try:
        if settings.frontier is not None:
            settings = await bind_job(frontier, settings)
            frontier.default_policy = HostPolicy(settings.delay_s, settings.host_concurrency)
        store = await open_store(settings.store)
        try:
            yield Backends(frontier, store, settings)
        finally:
            await store.close()
    finally:
        await frontier.close()
