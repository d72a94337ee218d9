"""`Middlewares`: a process's downloader and spider middlewares, loaded and called in order.

Built once per worker (`crawlq.engine.deps.Deps`) from the ``downloader_middlewares`` and
``spider_middlewares`` settings, then the spider class's attributes of the same names. Each
entry is a class or a ``module:Class`` / ``path/file.py:Class`` path
(`crawlq.spider.load_object`), instantiated once with no arguments, or an instance. Both are
per-process settings (never a shared job's, `crawlq.engine.job`): a job's Redis keys cannot
choose the code a worker runs.

What the engine does with what they return, and what they cannot change (robots.txt, the
private-address guard, scope, dedup, politeness, retries) is `crawlq.engine.step`.

A ``process_request`` that answers without a fetch returns `response`: a
`crawlq.request.FetchResult` made by a middleware, not by a fetch.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from crawlq.errors import ConfigError, SpiderError
from crawlq.request import CrawlRequest, FetchResult
from crawlq.settings import Settings
from crawlq.spider import CallbackRun, Response, Spider, load_object

__all__ = ["Middlewares", "SpiderOutputRun", "response"]

Returned = CrawlRequest | FetchResult | None
"""What ``process_request`` and ``process_exception`` return."""

_DOWNLOADER_HOOKS = ("process_request", "process_response", "process_exception")
_SPIDER_HOOKS = ("process_spider_output",)


async def _call(hook: Any, *args: Any) -> Any:
    """Call a sync or ``async def`` hook; await what an async one returns."""
    value = hook(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


def _check(value: Any, hook: Any, allowed: tuple[type, ...]) -> Any:
    if value is not None and not isinstance(value, allowed):
        names = " or ".join(t.__name__ for t in allowed)
        raise TypeError(
            f"{_name(hook)} returned a {type(value).__name__}; expected {names} or None"
        )
    return value


def _name(hook: Any) -> str:
    owner = getattr(hook, "__self__", None)
    return f"{type(owner).__name__}.{hook.__name__}" if owner is not None else str(hook)


@dataclass(frozen=True, slots=True)
class Middlewares:
    """The middlewares of one process, in the order given (settings first, then the spider's).

    Attributes:
        downloader: Downloader middleware instances.
        spider: Spider middleware instances.
    """

    downloader: tuple[object, ...] = ()
    spider: tuple[object, ...] = ()

    @classmethod
    def build(cls, settings: Settings, spider: Spider) -> Middlewares:
        """Load and instantiate the middlewares ``settings`` and ``spider`` name.

        Raises:
            ConfigError: Named ``downloader_middlewares`` or ``spider_middlewares``: a path
                that cannot be loaded, a class that cannot be instantiated with no
                arguments, or an object with none of the hooks.
        """
        return cls(
            _instances(
                "downloader_middlewares",
                [*settings.downloader_middlewares, *getattr(spider, "downloader_middlewares", ())],
                _DOWNLOADER_HOOKS,
            ),
            _instances(
                "spider_middlewares",
                [*settings.spider_middlewares, *getattr(spider, "spider_middlewares", ())],
                _SPIDER_HOOKS,
            ),
        )

    async def process_request(self, request: CrawlRequest) -> Returned:
        """Each ``process_request(request)`` in order.

        A request for the same URL replaces ``request`` for the middlewares after it (so
        several can each add a header); a response or a request for another URL ends the
        chain. Returns None when none returned anything, else the last request or the
        response.

        Raises:
            Retry: A middleware asks for a retry.
            Exception: What a middleware raised, or TypeError for a value of another type.
        """
        url, replaced = request.url, False
        for mw in self.downloader:
            hook = getattr(mw, "process_request", None)
            if hook is None:
                continue
            got = _check(await _call(hook, request), hook, (CrawlRequest, FetchResult))
            if isinstance(got, CrawlRequest) and got.url == url:
                request, replaced = got, True
            elif got is not None:
                return cast(Returned, got)
        return request if replaced else None

    async def process_response(
        self, request: CrawlRequest, response: FetchResult
    ) -> FetchResult | CrawlRequest:
        """Each ``process_response(request, response)`` in reverse order (the last first).

        Each gets the response the one before returned; a returned request ends the chain.
        None is refused (a middleware drops nothing: it returns a response or a request).

        Raises:
            Retry: A middleware asks for a retry.
            Exception: What a middleware raised, or TypeError for a value of another type.
        """
        for mw in reversed(self.downloader):
            hook = getattr(mw, "process_response", None)
            if hook is None:
                continue
            got = _check(await _call(hook, request, response), hook, (CrawlRequest, FetchResult))
            if got is None:
                raise TypeError(f"{_name(hook)} returned None; expected a response or a request")
            if isinstance(got, CrawlRequest):
                return got
            response = got
        return response

    async def process_exception(self, request: CrawlRequest, exc: Exception) -> Returned:
        """Each ``process_exception(request, exc)`` in reverse order, until one returns one.

        Raises:
            Retry: A middleware asks for a retry.
            Exception: What a middleware raised, or TypeError for a value of another type.
        """
        for mw in reversed(self.downloader):
            hook = getattr(mw, "process_exception", None)
            if hook is not None:
                got = _check(await _call(hook, request, exc), hook, (CrawlRequest, FetchResult))
                if got is not None:
                    return cast(Returned, got)
        return None

    def spider_output(self, response: Response, run: CallbackRun) -> SpiderOutputRun | None:
        """Start the spider middlewares on a callback's output (on the page thread).

        ``run``'s items and requests (items first, then requests, each in the order yielded)
        go through each ``process_spider_output(response, results)`` in order, on the
        calling thread as long as each returns a plain iterable; from the first that returns
        an async iterable (``async def`` generator), the rest runs on the event loop
        (`SpiderOutputRun.finish`). What the last returns replaces ``run``'s items and
        requests.

        Returns:
            None when the output is final (``run`` holds it), else the part to finish.

        Raises:
            SpiderError: A middleware raised, or produced a value that is not an item or a
                request (named by the middleware's class).
        """
        if not self.spider:
            return None
        rest = SpiderOutputRun(response, run, list(self.spider))
        return None if rest.advance() else rest


class SpiderOutputRun:
    """Spider middlewares left to run on the event loop (`Middlewares.spider_output`)."""

    __slots__ = ("_pending", "_response", "_rest", "_run")

    def __init__(self, response: Response, run: CallbackRun, rest: list[object]) -> None:
        self._response = response
        self._run = run
        self._rest = rest
        self._pending: tuple[str, AsyncIterable[object]] | None = None

    def _results(self) -> list[object]:
        results: list[object] = [*self._run.items, *self._run.requests]
        self._run.items, self._run.requests = [], []
        return results

    def advance(self) -> bool:
        """Run the middlewares that return plain iterables; False at one that is async."""
        while self._rest:
            mw = self._rest.pop(0)
            name = f"{type(mw).__name__}.process_spider_output"
            try:
                output = mw.process_spider_output(self._response, self._results())  # type: ignore[attr-defined]
                if isinstance(output, AsyncIterable):
                    self._pending = (name, output)
                    return False
                for value in cast(Iterable[object], output):
                    self._run.collect(value)
            except Exception as exc:
                raise SpiderError.raised(self._response.url, name, exc) from exc
        return True

    async def finish(self) -> tuple[list[Any], list[CrawlRequest]]:
        """Run the rest on the event loop; return the final ``(items, requests)``.

        Raises:
            SpiderError: As `Middlewares.spider_output`.
        """
        while self._pending is not None:
            name, output = self._pending
            self._pending = None
            try:
                async for value in output:
                    self._run.collect(value)
            except Exception as exc:
                raise SpiderError.raised(self._response.url, name, exc) from exc
            self.advance()
        return self._run.items, self._run.requests


def _instances(setting: str, specs: Sequence[Any], hooks: tuple[str, ...]) -> tuple[object, ...]:
    """Each spec loaded and instantiated (see `Middlewares.build`)."""
    out: list[object] = []
    for spec in specs:
        found = load_object(spec, setting) if isinstance(spec, str) else spec
        if isinstance(found, type):
            try:
                found = found()
            except Exception as exc:
                raise ConfigError(
                    setting, f"{spec!r}: {type(exc).__name__} instantiating it: {exc}"
                ) from exc
        if not any(callable(getattr(found, hook, None)) for hook in hooks):
            raise ConfigError(setting, f"{spec!r} has none of the hooks {', '.join(hooks)}")
        out.append(found)
    return tuple(out)


def response(
    request: CrawlRequest,
    body: bytes | str = b"",
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    encoding: str = "utf-8",
) -> FetchResult:
    """A response to ``request`` that ``process_request`` returns to skip the fetch.

    Args:
        request: The request it answers (its URL is the response's).
        body: The body; a ``str`` is encoded with ``encoding``.
        status: HTTP status.
        headers: Response headers (names lower-cased here); default ``text/html``.
        encoding: The body's character encoding.
    """
    data = body.encode(encoding) if isinstance(body, str) else body
    given = {k.lower(): v for k, v in (headers or {"content-type": "text/html"}).items()}
    text = data.decode(encoding, errors="replace")
    return FetchResult(request.url, request.url, status, given, data, encoding, text, 0.0)
