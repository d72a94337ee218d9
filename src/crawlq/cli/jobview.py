"""Open a crawl's frontier and store to look at them (``inspect``, ``dead list|replay``).

Where things are, as ``crawl`` and ``worker`` name them: the embedded frontier is the
``--store`` SQLite file (default ``crawlq.db``), or a SQLite ``--frontier`` file; a shared job
is ``--frontier redis://… --job NAME``, its store the job's own (``--store`` or
``CRAWLQ_STORE`` give it with its password). A SQLite frontier is looked at read-only, without
its lock, so a running crawl can be inspected; a replay opens it as its owner (and is refused
while a crawl runs on it). A job run by the Celery engine is opened with its Celery state too.

Nothing here creates a file or a job: a path that does not exist or a job never seeded is
`BadInput`, naming the option.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawlq.errors import ConfigError, CrawlqError
from crawlq.frontier import Frontier
from crawlq.secrecy import redact, without_password
from crawlq.settings import check_job_name
from crawlq.settings.checks import is_redis_url
from crawlq.store import Store, open_store

if TYPE_CHECKING:
    from crawlq.celery.runtime.state import CeleryState

__all__ = ["BadInput", "JobView", "open_view"]


class BadInput(Exception):
    """An option names nothing that exists (``option``: the option, as the user wrote it)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True, slots=True)
class JobView:
    """A crawl's frontier and store, opened for looking (or for a replay).

    Attributes:
        frontier: The frontier (read-only for SQLite unless opened to write).
        celery: The job's Celery-engine state when the Celery engine runs it, else None.
        store: The store, read-only, or None when it cannot be read (see ``store_problem``).
        store_problem: Why the store could not be opened, or None.
        settings: The job's stored settings (None for an embedded crawl, which stores none).
        name: How messages name the crawl: ``job 'docs'`` or the SQLite file.
        store_url: The store's URL or path (without its password), or None.
    """

    frontier: Frontier
    celery: CeleryState | None
    store: Store | None
    store_problem: str | None
    settings: dict[str, Any] | None
    name: str
    store_url: str | None

    @property
    def engine(self) -> str:
        """``celery`` or ``native``."""
        return "native" if self.celery is None else "celery"


@contextlib.asynccontextmanager
async def open_view(
    frontier_url: str | None,
    job: str | None,
    store_url: str | None,
    *,
    write: bool = False,
    need_store: bool = False,
) -> AsyncIterator[JobView]:
    """Open the frontier (and the Celery state, and the store) that the options name.

    Args:
        frontier_url: ``--frontier``: None (embedded in the store file), a SQLite file, or
            ``redis://…``.
        job: ``--job`` (required with Redis).
        store_url: ``--store``: None for the default (``crawlq.db``, or the job's store).
        write: Open a SQLite frontier as its owner (a replay), not read-only.
        need_store: A store that cannot be opened is an error, not a note.

    Raises:
        BadInput: No such file or job, or an option missing or malformed.
        FrontierLocked: ``write`` and a crawl owns the SQLite frontier.
        CrawlqError: A backend cannot be reached or read.
    """
    if is_redis_url(frontier_url):
        async with _open_job(frontier_url, job, store_url, need_store=need_store) as view:
            yield view
        return
    if job is not None:
        raise BadInput("--job", "a job name needs a shared --frontier redis://…")
    if frontier_url is None:
        path = _sqlite_path(store_url or "crawlq.db", "--store")
        store_url = str(path)
    else:
        path = _sqlite_path(frontier_url, "--frontier")
    from crawlq.frontier.sqlite import SqliteFrontier

    try:
        frontier = await SqliteFrontier.open(path, read_only=not write)
    except CrawlqError as exc:
        if "no crawlq frontier" in str(exc):
            option = "--frontier" if frontier_url is not None else "--store"
            raise BadInput(option, str(exc)) from None
        raise
    try:
        settings = await frontier.job_settings(None)
        store, problem = await _open_store(store_url or str(path), need_store)
        try:
            yield JobView(frontier, None, store, problem, settings, str(path), store_url)
        finally:
            if store is not None:
                await store.close()
    finally:
        await frontier.close()


def _sqlite_path(value: str, option: str) -> Path:
    if "://" in value and not value.startswith("sqlite:///"):
        raise BadInput(
            option,
            f"{redact(value)!r} cannot hold a frontier: give --frontier (a SQLite file or "
            "redis://…) and --job",
        )
    path = Path(value.removeprefix("sqlite:///"))
    if not path.is_file():
        raise BadInput(option, f"{value!r}: no such file (no crawl has used it)")
    return path


@contextlib.asynccontextmanager
async def _open_job(
    url: str, job: str | None, store_url: str | None, *, need_store: bool
) -> AsyncIterator[JobView]:
    if not job:
        raise BadInput("--job", "a shared frontier needs the job's name (--job NAME)")
    try:
        check_job_name(job)
    except ConfigError as exc:
        raise BadInput("--job", str(exc).removeprefix("job: ")) from None
    from crawlq.frontier.redis import RedisFrontier

    frontier = await RedisFrontier.open(url, job)
    try:
        if frontier.job_id is None:
            raise BadInput(
                "--job",
                f"{job!r}: no such job on {redact(url)} (never seeded, or its keys are gone)",
            )
        settings = await frontier.job_settings(None)
        celery = None
        if await frontier.job_engine() == "celery":
            from crawlq.celery.runtime.state import CeleryState

            celery = await CeleryState.open(url, job, expect_id=frontier.job_id)
        try:
            chosen = _job_store(store_url, settings)
            store: Store | None = None
            problem: str | None = "the job names no store"
            if chosen is not None:
                store, problem = await _open_store(chosen, need_store)
            try:
                shown = None if chosen is None else without_password(chosen)
                yield JobView(frontier, celery, store, problem, settings, f"job {job!r}", shown)
            finally:
                if store is not None:
                    await store.close()
        finally:
            if celery is not None:
                await celery.close()
    finally:
        await frontier.close()


def _job_store(given: str | None, settings: dict[str, Any] | None) -> str | None:
    """``--store``, else the job's store (with the password of an equal ``CRAWLQ_STORE``)."""
    if given is not None:
        return given
    stored = (settings or {}).get("store")
    own = os.environ.get("CRAWLQ_STORE")
    if isinstance(stored, str) and own and without_password(own) == without_password(stored):
        return own
    return stored if isinstance(stored, str) else own


async def _open_store(url: str, need: bool) -> tuple[Store | None, str | None]:
    if "://" not in url and not Path(url.removeprefix("sqlite:///")).is_file():
        if need:
            raise BadInput("--store", f"{url!r}: no such file")
        return None, f"{url}: no such file"
    try:
        return await open_store(url, read_only=True), None
    except CrawlqError as exc:
        if need:
            raise
        return None, str(exc)
