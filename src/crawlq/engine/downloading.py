"""One fetch through the downloader middlewares, with the engine's policy kept outside them.

`download` is what `crawlq.engine.step.process` calls for a lease whose robots.txt check
passed. Without downloader middlewares it is the fetch. With them (`crawlq.middleware`):

* ``process_request`` runs before the fetch. A request it returns for the **same URL**
  (normalised) replaces the request sent (its method, body, headers and cookies); the
  fetch is then exactly a crawl's (the private-address guard in the resolver, the size
  caps, the politeness slot of this lease). A request for **another URL** is not fetched
  here: it becomes this outcome's link, through the job's scope (the same depth and
  referrer as a redirect hop), so the frontier dedups it and a later lease checks its
  robots.txt and the guard; this URL ends as a filtered record ``middleware_request``. A
  response it returns is the page, and nothing is sent.
* ``process_response`` gets each response (one that ``process_request`` returned too),
  redirects included (a crawl's redirects are hops, `crawlq.engine.redirects`). A request
  for the same URL is a **retry**: this lease's request goes back to the frontier through
  the retry policy (`crawlq.rules.retry.decide`, reason ``middleware_retry``), counted and backed
  off, dead-lettered after ``max_retries``; a middleware that wants other headers on the
  retry sets them in ``process_request``, which runs again. Another URL: as above.
* ``process_exception`` gets a failed fetch's `crawlq.errors.FetchError` (a timeout, a
  5xx, a body over the cap), never a refusal of the policy (robots.txt, the guard) nor a
  proxy's failure (the engine benches the proxy and sends the URL again,
  `crawlq.rules.proxies`). None leaves it to the retry policy as without middlewares.
* `crawlq.errors.Retry` raised by any hook is a transient failure with the given reason.

A hook that raises anything else, or returns a value of another type, dead-letters the URL
as ``middleware_error`` naming the hook, logged with its traceback: user code, as a
callback's spider error, but a fetch that did not happen has no page to store.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from crawlq.engine.deps import Deps
from crawlq.engine.fetch_feedback import failed_fetch
from crawlq.engine.outcome import Kind, Outcome, dead_outcome
from crawlq.errors import FetchError, ProxiesBenched, ProxyFailed, Retry, RobotsUnreachable
from crawlq.records import FilteredRecord
from crawlq.request import CrawlRequest, FetchResult, Lease
from crawlq.rules.scope import FilterReason

__all__ = ["MIDDLEWARE_ERROR", "MIDDLEWARE_REQUEST", "MIDDLEWARE_RETRY", "download"]

logger = logging.getLogger(__name__)

MIDDLEWARE_REQUEST = "middleware_request"
"""Filter reason of a URL whose middleware replaced it by a request for another URL."""
MIDDLEWARE_RETRY = "middleware_retry"
"""Retry (and dead-letter) reason of a URL whose ``process_response`` returned its request."""
MIDDLEWARE_ERROR = "middleware_error"
"""Dead-letter reason of a URL whose middleware raised (or returned a wrong value)."""

Send = Callable[[CrawlRequest], Awaitable[FetchResult]]
T = TypeVar("T")


class _HookFailed(Exception):
    """A middleware hook raised (not `Retry`) or returned a wrong value."""


async def download(lease: Lease, send: Send, deps: Deps) -> FetchResult | Outcome:
    """Fetch ``lease``'s request with ``send`` through the middlewares (module docstring).

    Returns:
        The response, or the outcome that ends the lease here (a retry, a dead letter, a
        filtered record with the other URL's request as its link).

    Raises:
        FetchError: The fetch failed and no middleware handled it (the caller's policy:
            retry, dead letter, or the guard's filtered record).
    """
    mw = deps.middlewares
    if not mw.downloader:
        return await send(lease.request)
    try:
        return await _download(lease, send, deps)
    except Retry as exc:
        exc.url = lease.request.url
        return await failed_fetch(lease, exc, deps)
    except _HookFailed as exc:
        cause = exc.__cause__ or exc
        logger.error("%s: middleware error: %s", lease.request.url, exc, exc_info=cause)
        return dead_outcome(lease, MIDDLEWARE_ERROR, str(exc))


async def _download(lease: Lease, send: Send, deps: Deps) -> FetchResult | Outcome:
    req = lease.request
    mw = deps.middlewares
    got = await _hook(mw.process_request(req), "process_request")
    if isinstance(got, CrawlRequest):
        if got.url != req.url:
            return _elsewhere(lease, got, "process_request", deps)
        req = got
    if isinstance(got, FetchResult):
        result = got
    else:
        try:
            result = await send(req)
        except (RobotsUnreachable, Retry, ProxyFailed, ProxiesBenched):
            raise  # policy: robots.txt waits, proxies are benched and swapped by the engine
        except FetchError as exc:
            if exc.reason == FilterReason.PRIVATE_ADDRESS:
                raise  # the guard's refusal is policy, not a failure to handle
            handled = await _hook(mw.process_exception(req, exc), "process_exception")
            if handled is None:
                raise
            if isinstance(handled, CrawlRequest):
                return await _again(lease, handled, "process_exception", deps)
            result = handled
    answer = await _hook(mw.process_response(req, result), "process_response")
    if isinstance(answer, CrawlRequest):
        return await _again(lease, answer, "process_response", deps)
    return answer


async def _hook(call: Awaitable[T], name: str) -> T:
    """Await a hook chain: `Retry` passes, any other exception is a `_HookFailed`."""
    try:
        return await call
    except (Retry, FetchError):
        raise
    except Exception as exc:
        raise _HookFailed(f"{name}: {type(exc).__name__}: {exc}") from exc


async def _again(lease: Lease, request: CrawlRequest, hook: str, deps: Deps) -> Outcome:
    """A request returned after the fetch: a retry for the same URL, else queued."""
    if request.url != lease.request.url:
        return _elsewhere(lease, request, hook, deps)
    detail = f"{hook} asked for the request again"
    return await failed_fetch(lease, Retry(MIDDLEWARE_RETRY, detail, url=request.url), deps)


def _elsewhere(lease: Lease, request: CrawlRequest, hook: str, deps: Deps) -> Outcome:
    """This URL filtered as ``middleware_request``; ``request`` queued through scope."""
    req = lease.request
    child = dataclasses.replace(request, referrer=req.url, depth=req.depth)
    admitted, reason = deps.scope.admit(child)
    outcome = Outcome(
        lease,
        Kind.FILTERED,
        filtered=FilteredRecord(
            req.record_fingerprint, req.url, MIDDLEWARE_REQUEST, req.depth, time.time()
        ),
        reason=MIDDLEWARE_REQUEST,
    )
    if reason is None:
        outcome.links.append(admitted)
    else:
        outcome.skipped[reason] += 1
    logger.info("%s: %s returned %s instead (%s)", req.url, hook, request.url, reason or "queued")
    return outcome
