"""Open a crawl's frontier and store from its settings, binding a shared job's settings."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from crawlq.engine.deps import Deps
from crawlq.engine.inbox import inbox_filter
from crawlq.engine.job import bind_job
from crawlq.engine.plan import absolute_store
from crawlq.engine.worker import Worker
from crawlq.errors import ConfigError, StoreError
from crawlq.fetch import Fetcher
from crawlq.frontier import Frontier, open_frontier
from crawlq.frontier.queue import QueueBounds
from crawlq.robots import RobotsCache
from crawlq.rules.politeness import Politeness
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.settings.checks import check_frontier, is_redis_url
from crawlq.spider import CLOSE_REASONS, Spider, spider_closed
from crawlq.spider.item_type import items_table_of
from crawlq.store import Store, open_store

if TYPE_CHECKING:
    from crawlq.frontier.redis import BloomDedup, RedisFrontier
    from crawlq.store.warc import WarcWriter

__all__ = ["Backends", "assembled_worker", "open_backends", "open_warc"]


@dataclass(frozen=True, slots=True)
class Backends:
    """An open frontier and store, and the settings they were opened with.

    Attributes:
        frontier: The crawl frontier (embedded SQLite, or a shared Redis job), opened with
            the job's politeness and queue bounds.
        store: The result store.
        settings: The settings in force: on a shared frontier, the job's values of the
            job-level fields (see `crawlq.engine.job`).
        inbox: The same frontier when it is a shared Redis job, whose inbox takes producers'
            untrusted entries (`assembled_worker` gives it the job's check); None otherwise.
    """

    frontier: Frontier
    store: Store
    settings: Settings
    inbox: RedisFrontier | None = None


@dataclass(frozen=True, slots=True)
class _Opener:
    """How to open the frontier of ``settings`` with the rules of a job (fixed at open)."""

    url: str
    settings: Settings
    bloom: BloomDedup | None
    on_redis: bool

    async def open(self, rules: Settings, *, create: bool) -> tuple[Frontier, RedisFrontier | None]:
        """The frontier, opened with the politeness, bounds and inbox limit of ``rules``."""
        politeness = Politeness.from_settings(rules)
        if not self.on_redis:
            frontier = await open_frontier(
                self.url,
                job=self.settings.job,
                politeness=politeness,
                bounds=QueueBounds.from_settings(rules),
            )
            return frontier, None
        try:
            from crawlq.frontier.redis import RedisFrontier
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError(
                "frontier",
                f"the Redis frontier needs redis-py: pip install 'crawlq[redis]' ({exc})",
            ) from exc
        shared = await RedisFrontier.open(
            self.url,
            self.settings.job or "",
            politeness=politeness,
            bloom=self.bloom,
            create=create,
            bounds=QueueBounds.from_settings(rules),
            inbox_max_entry_bytes=rules.inbox_max_entry_bytes,
        )
        return shared, shared


def _opened_alike(a: Settings, b: Settings) -> bool:
    """Whether a frontier opened with the rules of ``a`` has those of ``b`` too."""
    return (
        Politeness.from_settings(a) == Politeness.from_settings(b)
        and QueueBounds.from_settings(a) == QueueBounds.from_settings(b)
        and a.inbox_max_entry_bytes == b.inbox_max_entry_bytes
    )


@contextlib.asynccontextmanager
async def open_backends(  # noqa: C901  (one branch per frontier/store pairing)
    settings: Settings,
    *,
    create: bool = False,
    runs_spider: bool = True,
    refuse_new: ConfigError | None = None,
) -> AsyncIterator[Backends]:
    """Open the frontier and the store of ``settings``, and close both on exit.

    ``settings.frontier`` None means the embedded frontier in ``settings.store``'s file.
    ``create`` (producers: seed, crawl) creates a shared job that does not exist yet and
    stores its settings; without it (workers) a job that was never seeded is an error.
    ``runs_spider``: this process loads the spider in force (see `bind_job`).
    ``refuse_new``: raised instead of creating a shared job that does not exist yet, before
    anything is written (`crawlq.engine.seeding.seed` of nothing, with no domains).

    A frontier's politeness and queue bounds are fixed when it is opened: a shared frontier
    is opened once to read (or store) the job's settings, and opened again with the job's
    rules when they differ from this process's.

    Raises:
        ConfigError: A shared frontier without a job name, settings that conflict with the
            job's, or ``bloom_capacity`` without a shared frontier.
        FrontierLocked, FrontierUnavailable, StoreError: A backend cannot be opened.
    """
    settings = absolute_store(settings)  # the file this process means, wherever its job's run
    given = settings.explicit
    if "://" not in settings.store:
        folder = Path(settings.store).parent
        if not folder.is_dir():
            raise ConfigError("store", f"{settings.store}: directory {folder} does not exist")
    if settings.frontier is None:
        if settings.bloom_capacity is not None:  # never silently ignored
            raise ConfigError(
                "bloom_capacity",
                "--bloom needs a shared --frontier redis://…: the embedded frontier always "
                "keeps an exact seen set",
            )
        if "://" in settings.store and not settings.store.startswith("sqlite:"):
            raise ConfigError(
                "frontier",
                f"the store {settings.store.split('@')[-1]} cannot hold the frontier: give "
                "--frontier (a SQLite file path, or redis://…)",
            )
        opener = _Opener(settings.store, settings, None, on_redis=False)
        frontier, inbox = await opener.open(settings, create=False)
    else:
        if not settings.job:
            raise ConfigError("job", "a shared frontier needs a job name (--job NAME)")
        bloom = None
        if settings.bloom_capacity is not None:
            from crawlq.frontier.redis import BloomDedup

            bloom = BloomDedup(settings.bloom_capacity, settings.bloom_error_rate)
        url = settings.frontier
        check_frontier(url)
        # a new Redis job is created only once its store opens (below): joined first
        on_redis = is_redis_url(url)
        opener = _Opener(url, settings, bloom, on_redis=on_redis)
        frontier, inbox = await opener.open(settings, create=create and not on_redis)
    try:
        store: Store | None = None
        opened = settings.store
        if settings.frontier is not None:
            own = settings
            if create and await frontier.job_settings(None) is None:
                if refuse_new is not None:
                    raise refuse_new
                # A new job records its store: make sure that store opens (and takes its
                # --items-table) before the job exists, or a typo in --store would be
                # pinned to the job (and the fixed command refused as a conflict), or a
                # refused store leave an empty job behind.
                store = await open_store(settings.store, items_table=items_table_of(settings))
            try:
                if create and opener.on_redis:
                    await frontier.close()
                    frontier, inbox = await opener.open(own, create=True)
                settings = await bind_job(
                    frontier, settings, create=create, runs_spider=runs_spider
                )
                if not _opened_alike(own, settings):  # the job's rules: fixed at open
                    await frontier.close()
                    frontier, inbox = await opener.open(settings, create=False)
            except BaseException:
                if store is not None:
                    await store.close()
                raise
        if store is not None and opened != settings.store:  # another producer won the race
            await store.close()
            store = None
        if store is None:
            store = await _open_job_store(settings, given=opened if "store" in given else None)
        try:
            yield Backends(frontier, store, settings, inbox)
        finally:
            await store.close()
    finally:
        await frontier.close()


async def _open_job_store(settings: Settings, *, given: str | None) -> Store:
    """Open the store in force; a store URL adopted from a job that fails says what to do.

    A shared job keeps its store URL without the password (`crawlq.engine.job`), so a worker
    given no ``--store`` of its own may be refused by the database.
    """
    try:
        return await open_store(settings.store, items_table=items_table_of(settings))
    except StoreError as exc:
        if given is not None or settings.frontier is None or "://" not in settings.store:
            raise
        raise type(exc)(
            f"{exc} (the job keeps its store URL without a password: give this worker "
            "--store with the credentials, or CRAWLQ_STORE, or PGPASSWORD)"
        ) from exc


@contextlib.asynccontextmanager
async def assembled_worker(
    backends: Backends,
    spider: Spider,
    scope: Scope,
    *,
    exit_when_done: bool = True,
    max_pages: int | None = None,
) -> AsyncIterator[Worker]:
    """A `Worker` wired to ``backends`` with its own fetcher and robots.txt cache.

    The fetcher, and the WARC writer when ``warc_dir`` is set, are closed on exit. Both
    engines' entry points (`crawlq.engine.crawl.Crawl` and
    `crawlq.engine.service.WorkerService`) build their worker here.

    Raises:
        ConfigError: ``warc_dir`` is set but warcio is not installed (the message names the
            ``warc`` extra).
        StoreError: The WARC directory cannot be created.
    """
    s = backends.settings
    if backends.inbox is not None:
        # a shared frontier drains an inbox of untrusted entries: give it the job's check
        backends.inbox.inbox_filter = inbox_filter(s, scope, spider)
    async with contextlib.AsyncExitStack() as stack:
        warc = await open_warc(s)
        if warc is not None:
            stack.push_async_callback(warc.close)
        fetcher = await stack.enter_async_context(Fetcher.from_settings(s))
        frontier = backends.frontier
        robots = RobotsCache.from_settings(fetcher, s, frontier) if s.obey_robots else None
        deps = Deps(s, fetcher, robots, spider, scope, frontier, frontier.politeness, warc)
        worker = Worker(
            backends.frontier,
            backends.store,
            deps,
            exit_when_done=exit_when_done,
            max_pages=max_pages,
            flush_max_items=s.flush_max_items,
            flush_interval_s=s.flush_interval_s,
        )

        async def closed(exc_type: type[BaseException] | None, *_: object) -> None:
            # after the pipelines close (an exit stack unwinds last in, first out)
            reason = CLOSE_REASONS.get(worker.stopped_by or "done", "finished")
            await spider_closed(spider, "shutdown" if exc_type is not None else reason)

        stack.push_async_exit(closed)
        stack.callback(deps.pages.close)
        if deps.items is not None:
            stack.push_async_callback(deps.items.close)
        yield worker


async def open_warc(s: Settings) -> WarcWriter | None:
    """The WARC writer of this process when ``s.warc_dir`` is set (else None); close it after.

    Raises:
        ConfigError: warcio (or, for ``s3://…``, boto3) is not installed; the message names
            the extra.
        StoreError: The directory cannot be created or repaired, or the object store
            cannot be reached.
    """
    if s.warc_dir is None:
        return None
    try:
        from crawlq.store.warc import WarcWriter
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            "warc_dir", f"WARC archiving needs warcio: pip install 'crawlq[warc]' ({exc})"
        ) from exc
    return await WarcWriter.open(
        s.warc_dir,
        max_size_bytes=s.warc_max_size_bytes,
        software=f"crawlq ({s.user_agent})",
        spool_dir=s.warc_spool_dir,
    )
