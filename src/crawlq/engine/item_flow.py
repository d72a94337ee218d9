"""What happens to a page's items between the callback and the store: `ItemFlow`.

In order, for the items of one page (both engines, ``crawlq reparse`` and ``crawlq parse``):

1. **validation** (built in, `crawlq.items.invalid`): against the item's own declared types,
   or the spider's ``item_type`` for a dict. A bad item is dropped as
   ``validation: invalid: field NAME: WHY`` and logged (WARNING, with the URL): the log line
   and the drop counts are its record; it is not stored.
2. **pipelines** (``item_pipelines``: the spider's attribute first, then the process's
   setting, each class once), one after another. A run of consecutive plain (sync)
   pipelines runs on the page thread within ``parse_timeout_s``, as a synchronous callback
   does, over all the page's items, one pipeline after the other; an ``async def``
   ``process_item`` runs on the event loop. So the order of the pipelines holds for every
   item, but a pipeline sees all of a page's items before the next one sees the first.
3. **item dedup** (``item_dedup_key``): an item whose key (`crawlq.items.item_key`) another
   page of the job produced first is dropped as ``item_dedup: duplicate_item``; so is a
   second item with one key on the same page. The owner of each key is kept in the frontier
   (`crawlq.frontier.items.ItemKeys.claim_item_keys`), so this holds across workers,
   machines and engines, and a page fetched or parsed again keeps its items.
4. the items become plain dicts (`crawlq.items.adapt`).

Drops are counted by ``"<pipeline>: <reason>"`` (`FlowResult.dropped`). A pipeline that
raises anything but `crawlq.items.DropItem` fails the page as a callback would
(`PipelineFailed`). Pipelines are code: they come only from this process's own
configuration and spider, never from a shared job's settings (`crawlq.engine.job`).

With no pipeline, no ``item_type`` and no ``item_dedup_key``, a page of dict items costs one
type check per item (`ItemFlow.run`'s fast path).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from crawlq.engine.pagework import PageWork
from crawlq.errors import ConfigError
from crawlq.items import DropItem, adapt, invalid, item_key
from crawlq.settings import Settings
from crawlq.spider import Spider
from crawlq.spider.item_type import load_item_type
from crawlq.spider.loading import load_object

__all__ = ["FlowResult", "ItemFlow", "ItemKeys", "PipelineFailed", "pipeline_specs"]

logger = logging.getLogger(__name__)

_OPENERS = ("open", "open_spider")
"""A pipeline's opening hooks, called with the spider in this order: crawlq's name, then
Scrapy's (``open_spider(spider)``), so a pipeline ported from Scrapy runs unchanged."""

REASON_CHARS = 80
"""Characters of a `DropItem` reason that count (the rest is cut)."""


class ItemKeys(Protocol):
    """Where item dedup keeps the owner of each key (a frontier)."""

    async def claim_item_keys(self, keys: Sequence[bytes], owner: bytes) -> list[bool]:
        """See `crawlq.frontier.items.ItemKeys.claim_item_keys`."""
        ...


class PipelineFailed(Exception):
    """A pipeline raised something other than `DropItem`: a spider error of the page.

    Attributes:
        pipeline: The pipeline's class name.
        error: What it raised (also the ``__cause__``).
    """

    def __init__(self, pipeline: str, error: BaseException) -> None:
        super().__init__(f"pipeline {pipeline}: {type(error).__name__}: {error}")
        self.pipeline = pipeline
        self.error = error


@dataclass(slots=True)
class FlowResult:
    """The items of a page that go to the store, and the ones dropped by reason."""

    items: list[dict[str, Any]]
    dropped: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class _Pipe:
    name: str
    obj: Any
    is_async: bool


def pipeline_specs(spider: type[Spider] | Spider, settings: Settings) -> list[Any]:
    """The pipelines a process runs: the spider's ``item_pipelines``, then the setting's.

    Each class (or spec string) once, at its first place.
    """
    listed = [*getattr(spider, "item_pipelines", ()), *settings.item_pipelines]
    out: list[Any] = []
    for spec in listed:
        if spec not in out:
            out.append(spec)
    return out


def _load(spec: Any) -> Any:
    """A pipeline instance from a class or a ``module:Class`` / ``file.py:Class`` spec."""
    cls = load_object(spec, "item_pipelines") if isinstance(spec, str) else spec
    if not isinstance(cls, type) or not callable(getattr(cls, "process_item", None)):
        raise ConfigError(
            "item_pipelines", f"{spec!r} is not a class with a process_item(item, response) method"
        )
    return cls()


class ItemFlow:
    """One worker's item processing (module docstring); `crawlq.engine.deps.Deps` holds one.

    Args:
        spider: The spider (its ``item_type`` and ``item_pipelines``).
        settings: ``item_pipelines``, ``item_type``, ``item_dedup_key``, ``parse_timeout_s``.
        keys: Where item dedup's owners live (the job's frontier); None: no item dedup.
        pipelines: Load and run the pipelines (False: validation, and dedup with ``keys``).

    Raises:
        ConfigError: A pipeline or the item type cannot be loaded (named ``item_pipelines``
            or ``item_type``).
    """

    def __init__(
        self, spider: Spider, settings: Settings, keys: ItemKeys | None, *, pipelines: bool = True
    ) -> None:
        self.spider = spider
        item_type: Any = getattr(spider, "item_type", None)
        if settings.item_type is not None:
            item_type = load_item_type(settings.item_type)  # an item class, or refused
        if item_type is not None and not isinstance(item_type, type):
            raise ConfigError("item_type", f"{item_type!r} is not a class")
        self.item_type: type | None = item_type
        self.dedup_key = tuple(settings.item_dedup_key)
        self.keys = keys if self.dedup_key else None
        self.budget_s = settings.parse_timeout_s
        self._pipes = [
            _Pipe(type(p).__name__, p, inspect.iscoroutinefunction(p.process_item))
            for p in (_load(spec) for spec in pipeline_specs(spider, settings) if pipelines)
        ]
        self._opened = False
        self.plain = not self._pipes and self.item_type is None and self.keys is None
        """No pipeline, no item type, no dedup: dict items go to the store as they are."""

    async def run(
        self,
        found: list[Any],
        response: Any,
        owner: bytes,
        pages: PageWork,
        *,
        url: str,
        invalid_found: Sequence[str] = (),
    ) -> FlowResult:
        """Take a page's items through validation, pipelines and dedup (module docstring).

        Args:
            found: What the callback yielded, in order.
            response: The page's `crawlq.spider.Response` (None for an errback's items).
            owner: The page's record fingerprint (20 bytes): the owner of its dedup keys.
            pages: The worker's page thread (synchronous pipelines run there).
            url: The page's URL, for log lines.
            invalid_found: Bad items the callback raised (pydantic ``ValidationError``).

        Raises:
            PipelineFailed: A pipeline raised something other than `DropItem`.
            crawlq.engine.pagework.PageTimeout: Synchronous pipelines ran past
                ``parse_timeout_s``.
            crawlq.errors.FrontierError: Item dedup could not reach the frontier.
        """
        result = FlowResult([])
        for reason in invalid_found:
            self._invalid(result, url, reason)
        if self.plain and all(type(i) is dict for i in found):
            result.items = found
            return result
        items: list[Any] = []
        for item in found:
            checked, why = invalid(item, self.item_type)
            if why is None:
                items.append(checked)
            else:
                self._invalid(result, url, why)
        if self._pipes and items:
            items = await self._pipelines(items, response, pages, result.dropped)
        plain = [adapt(i) for i in items]
        if self.keys is not None and plain:
            plain = await self._dedup(plain, owner, result.dropped)
        result.items = plain
        return result

    async def close(self) -> None:
        """Call each opened pipeline's ``close()``, then Scrapy's ``close_spider(spider)``.

        Once; errors are logged, not raised. A pipeline may define either name, or both.
        """
        if not self._opened:
            return
        self._opened = False
        for pipe in self._pipes:
            for name, args in (("close", ()), ("close_spider", (self.spider,))):
                closer = getattr(pipe.obj, name, None)
                if not callable(closer):
                    continue
                try:
                    done = closer(*args)
                    if inspect.isawaitable(done):
                        await done
                except Exception:
                    logger.exception("item pipeline %s: %s() failed", pipe.name, name)

    def _invalid(self, result: FlowResult, url: str, why: str) -> None:
        logger.warning("%s: bad item not stored: invalid: %s", url, why)
        result.dropped[f"validation: invalid: {why}"[:200]] += 1

    async def _open(self) -> None:
        self._opened = True
        for pipe in self._pipes:
            for name in _OPENERS:
                opener = getattr(pipe.obj, name, None)
                if callable(opener):
                    done = opener(self.spider)
                    if inspect.isawaitable(done):
                        await done

    async def _pipelines(
        self, items: list[Any], response: Any, pages: PageWork, dropped: Counter[str]
    ) -> list[Any]:
        if not self._opened:
            await self._open()
        i = 0
        while i < len(self._pipes) and items:
            if self._pipes[i].is_async:
                items = [
                    out
                    for item in items
                    if (out := await _async_one(self._pipes[i], item, response, dropped))
                    is not None
                ]
                i += 1
                continue
            j = i
            while j < len(self._pipes) and not self._pipes[j].is_async:
                j += 1
            work = functools.partial(_sync_run, self._pipes[i:j], items, response, dropped)
            items = await pages.run(work, self.budget_s)
            i = j
        return items

    async def _dedup(
        self, items: list[dict[str, Any]], owner: bytes, dropped: Counter[str]
    ) -> list[dict[str, Any]]:
        assert self.keys is not None
        keyed = [item_key(item, self.dedup_key) for item in items]
        unique = list(dict.fromkeys(k for k in keyed if k is not None))
        kept = dict(zip(unique, await self.keys.claim_item_keys(unique, owner), strict=True))
        out: list[dict[str, Any]] = []
        for item, key in zip(items, keyed, strict=True):
            if key is not None:
                if not kept.get(key):
                    dropped["item_dedup: duplicate_item"] += 1
                    continue
                kept[key] = False  # a second item with this key on this page
            out.append(item)
        return out


def _dropped(pipe: _Pipe, out: Any, dropped: Counter[str]) -> Any:
    if out is None:
        dropped[f"{pipe.name}: dropped"] += 1
    return out


def _drop_reason(pipe: _Pipe, exc: DropItem, dropped: Counter[str]) -> None:
    dropped[f"{pipe.name}: {exc.reason[:REASON_CHARS]}"] += 1


def _sync_run(
    pipes: list[_Pipe], items: list[Any], response: Any, dropped: Counter[str]
) -> list[Any]:
    """Plain pipelines over all items, one pipeline after the other (on the page thread)."""
    for pipe in pipes:
        out: list[Any] = []
        for item in items:
            try:
                kept = _dropped(pipe, pipe.obj.process_item(item, response), dropped)
            except DropItem as exc:
                _drop_reason(pipe, exc, dropped)
                continue
            except Exception as exc:
                raise PipelineFailed(pipe.name, exc) from exc
            if kept is not None:
                out.append(kept)
        items = out
    return items


async def _async_one(pipe: _Pipe, item: Any, response: Any, dropped: Counter[str]) -> Any:
    try:
        return _dropped(pipe, await pipe.obj.process_item(item, response), dropped)
    except DropItem as exc:
        _drop_reason(pipe, exc, dropped)
        return None
    except Exception as exc:
        raise PipelineFailed(pipe.name, exc) from exc
