"""The check a shared frontier applies to each request of a job's inbox (`inbox_filter`).

An inbox entry (``LPUSH`` on the job's inbox key by any producer) is untrusted input: the
frontier queues it only as the job's rules allow, with the job's URL rules applied.
"""

from __future__ import annotations

from collections.abc import Callable

from crawlq.request import CrawlRequest
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.sitemap import SITEMAP_CALLBACK
from crawlq.spider import Spider, is_callback

__all__ = ["inbox_filter"]


def inbox_filter(
    settings: Settings, scope: Scope, spider: Spider | None = None
) -> Callable[[CrawlRequest], CrawlRequest | str]:
    """The check a shared frontier applies to each inbox request before queuing it.

    An inbox entry is untrusted input: it may not be a redirect ``revisit`` (whose record
    would replace a stored page's), its method must be one of the job's
    ``inbox_methods`` (GET and HEAD by default), and unless the job sets
    ``inbox_bypass_scope`` it must be in the job's scope (allowed domains, include, exclude,
    max depth, traps), as a discovered link must. Its URL gets the job's URL rules
    (``strip_url_params``) either way, as links and seeds do. A callback it names must be a
    callback of the worker's ``spider`` (`crawlq.spider.is_callback`: a public method) or
    the sitemap marker, and so must an ``errback`` it names: an entry naming another is
    rejected before anything is fetched, rather than fetched and then recorded as a spider
    error.

    Returns:
        A function of a request: the request to queue (rewritten by the URL rules), else the
        reason it is rejected (``method_not_allowed: POST``, ``out_of_scope: offsite``,
        ``revisit_not_allowed``, ``unknown_callback: 'x'``, ``unknown_errback: 'x'``...).
    """
    methods = frozenset(settings.inbox_methods)
    bypass = settings.inbox_bypass_scope

    def check(request: CrawlRequest) -> CrawlRequest | str:
        if request.revisit:
            return "revisit_not_allowed: only the engine queues redirect revisits"
        if request.method not in methods:
            allowed = ", ".join(sorted(methods)) or "none"
            return f"method_not_allowed: {request.method} (the job allows {allowed})"
        for kind, name in (("callback", request.callback), ("errback", request.errback)):
            if spider is not None and _unknown(spider, name, kind):
                assert name is not None
                return (
                    f"unknown_{kind}: {name[:100]!r} is not a callback of the worker's spider"
                    f" {type(spider).__name__}"
                )
        request, reason = scope.admit(request)
        if reason is not None and not bypass:
            return f"out_of_scope: {reason}"
        return request

    return check


def _unknown(spider: Spider, name: str | None, kind: str) -> bool:
    """Whether ``name`` (a callback or errback an inbox entry names) is not the spider's."""
    if name is None or (kind == "callback" and name == SITEMAP_CALLBACK):
        return False
    return not is_callback(spider, name)
