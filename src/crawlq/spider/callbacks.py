"""Running a spider's callbacks and errbacks: `run_callback`, and `Failure`, what an errback gets.

`start_callback` calls the callback and runs its synchronous part (a plain function, or a
generator's iteration) on the engine's page thread; `CallbackRun.finish` runs what is
asynchronous (an awaitable, an async generator) on the event loop. Whatever goes wrong
becomes a `crawlq.errors.SpiderError` with the callback's exception as its ``__cause__``.

Errbacks. A request names its errback (``CrawlRequest(errback="on_error")``,
``response.follow(..., errback=self.on_error)``) under the same rule as a callback
(`crawlq.spider.spider.callback_method`: a public method of the spider). The engine calls it
as ``errback(failure)`` (`start_errback`), with a `Failure`:

* when the request ends as a dead letter (retries of a 5xx or a connection failure spent,
  ``host_unreachable``, ``too_many_redirects``, ``body_too_large``...): ``reason`` is the
  dead letter's reason, ``detail`` its detail, ``response`` None;
* when a response has a status outside 2xx and 3xx that the spider does not handle
  (`crawlq.spider.Spider.wants_status`, ``handle_httpstatus_list``): ``reason`` is
  ``http_<status>`` and ``response`` the `Response` (its body, headers, links).

An errback may return or yield items and requests exactly as a callback: items are stored
for the request's URL, requests go through scope and dedup like a callback's.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from crawlq.errors import SpiderError
from crawlq.items import is_item
from crawlq.items.validate import validation_error_reason
from crawlq.request import CrawlRequest
from crawlq.spider.response import Response
from crawlq.spider.spider import Spider, callback_method

__all__ = ["CallbackRun", "Failure", "run_callback", "start_callback", "start_errback"]


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a request failed, as its errback sees it.

    Attributes:
        request: The request that failed (its ``meta``, ``cb_kwargs``, URL).
        reason: A short code: a dead-letter reason (``connect_error``, ``timeout``,
            ``host_unreachable``...) or ``http_<status>``.
        detail: The failure's detail, as stored with a dead letter ("" for a status).
        response: The response for an ``http_<status>`` failure, else None.
    """

    request: CrawlRequest
    reason: str
    detail: str = ""
    response: Response | None = None

    @property
    def url(self) -> str:
        """The request's URL."""
        return self.request.url

    @property
    def meta(self) -> Mapping[str, Any]:
        """The request's ``meta``."""
        return self.request.meta


async def run_callback(spider: Spider, response: Response) -> tuple[list[Any], list[CrawlRequest]]:
    """Call the request's callback on ``response`` and collect what it produced.

    The callback is ``spider.<response.request.callback or "parse">``, called as
    ``callback(response, **response.request.cb_kwargs)``. It may return None, an item
    (a ``dict``, a dataclass, attrs or pydantic instance: `crawlq.items.is_item`), a
    `CrawlRequest`, an iterable or generator of those, an awaitable of any of these
    (``async def``), or an async generator. None inside an iterable is skipped. A pydantic
    ``ValidationError`` the callback raises (making a model from bad data) is not a failure
    of the page: it ends the callback there, keeps what it produced before, and is recorded
    as a bad item in `CallbackRun.invalid`.
    The engine checks `Spider.wants_status` before calling this, and runs the synchronous
    part (`start_callback`: a plain callback, or a generator's iteration) on its page
    thread, off the event loop, and only what is asynchronous (`CallbackRun.finish`) on the
    loop.

    Args:
        spider: The spider instance.
        response: The page to parse.

    Returns:
        ``(items, requests)`` in the order produced.

    Raises:
        SpiderError: The callback is missing, raised an exception (chained as the
            ``__cause__``), or produced a value that is neither a dict nor a
            `CrawlRequest`. Nothing of a failed callback's output is returned.
    """
    return await start_callback(spider, response).finish()


class CallbackRun:
    """A callback call: what it produced synchronously, and what is left to await.

    Attributes:
        items: Items produced so far, as yielded (dicts, dataclasses...).
        requests: Requests produced so far.
        invalid: Bad items: ``"field NAME: WHY"`` of each pydantic ``ValidationError`` the
            callback raised (at most one: it ends the callback).
        pending: An awaitable or async iterable still to run on the event loop, or None
            when the callback is done.
    """

    __slots__ = ("_name", "_url", "invalid", "items", "pending", "requests")

    def __init__(self, url: str, name: str) -> None:
        self._url = url
        self._name = name
        self.items: list[Any] = []
        self.requests: list[CrawlRequest] = []
        self.invalid: list[str] = []
        self.pending: object = None

    def collect(self, value: object) -> None:
        """Add one produced value (None is skipped).

        Raises:
            TypeError: ``value`` is neither an item (`crawlq.items.is_item`) nor a
                `CrawlRequest`.
        """
        if isinstance(value, dict):
            self.items.append(value)
        elif isinstance(value, CrawlRequest):
            self.requests.append(value)
        elif value is not None:
            if not is_item(value):
                raise TypeError(
                    f"produced a {type(value).__name__}; expected an item (a dict, dataclass,"
                    " attrs or pydantic instance) or a CrawlRequest"
                )
            self.items.append(value)

    def failed(self, exc: Exception) -> SpiderError | None:
        """The callback raised ``exc``: the error to raise, or None for a bad item.

        A pydantic ``ValidationError`` is recorded in `invalid`; the callback's output so
        far is kept.
        """
        why = validation_error_reason(exc)
        if why is None:
            return SpiderError.raised(self._url, self._name, exc)
        self.invalid.append(why)
        return None

    def collect_output(self, output: object) -> None:
        """Collect a synchronous output; keep an awaitable or async iterable as `pending`."""
        if inspect.isawaitable(output) or isinstance(output, AsyncIterable):
            self.pending = output
        else:
            self._collect_sync(output)

    def _collect_sync(self, output: object) -> None:
        if output is None or isinstance(output, dict | CrawlRequest):
            self.collect(output)
        elif isinstance(output, Iterable) and not isinstance(output, str | bytes):
            for value in output:
                self.collect(value)
        else:
            self.collect(output)  # raises TypeError

    async def finish(self) -> tuple[list[Any], list[CrawlRequest]]:
        """Run what is `pending` on the event loop; return ``(items, requests)``.

        Raises:
            SpiderError: As `run_callback`.
        """
        pending, self.pending = self.pending, None
        try:
            if inspect.isawaitable(pending):
                pending = await pending
                if not isinstance(pending, AsyncIterable):
                    self._collect_sync(pending)
                    pending = None
            if pending is not None:
                async for value in cast(AsyncIterable[object], pending):
                    self.collect(value)
        except Exception as exc:
            error = self.failed(exc)
            if error is not None:
                raise error from exc
        return self.items, self.requests


def start_callback(spider: Spider, response: Response) -> CallbackRun:
    """Call the callback (as `run_callback`) and run its synchronous part.

    A plain function's result, and every value of a generator, are collected here; an
    awaitable or async generator is left in `CallbackRun.pending` for
    `CallbackRun.finish`, on the event loop.

    Raises:
        SpiderError: As `run_callback`.
    """
    name = response.request.callback or "parse"
    method = callback_method(spider, name, response.url)
    run = CallbackRun(response.url, name)
    try:
        run.collect_output(method(response, **response.request.cb_kwargs))
    except Exception as exc:
        error = run.failed(exc)
        if error is not None:
            raise error from exc
    return run


def start_errback(spider: Spider, failure: Failure) -> CallbackRun:
    """Call the request's errback with ``failure`` and run its synchronous part.

    As `start_callback`, for ``spider.<failure.request.errback>(failure)``; the name must be
    a public method of the spider, as a callback's (`crawlq.spider.spider.callback_method`).

    Raises:
        SpiderError: As `run_callback` (``MissingCallback`` for a name that is not allowed).
        ValueError: The request names no errback.
    """
    name = failure.request.errback
    if not name:
        raise ValueError(f"{failure.url}: the request names no errback")
    method = callback_method(spider, name, failure.url)
    run = CallbackRun(failure.url, name)
    try:
        run.collect_output(method(failure))
    except Exception as exc:
        error = run.failed(exc)
        if error is not None:
            raise error from exc
    return run
