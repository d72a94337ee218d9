"""The sitemap request: its marker callback, its meta keys, and how listed URLs rank.

A sitemap is a `CrawlRequest` whose callback is `SITEMAP_CALLBACK` (`sitemap_request` makes
one); the name is not a Python identifier, so no spider method can be called by it. A URL a
sitemap lists gets the priority `listed_priority` gives (one step per 0.1 of ``<priority>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crawlq.request import CrawlRequest

__all__ = [
    "LASTMOD_KEY",
    "MAX_NESTING",
    "NESTING_KEY",
    "SITEMAP_CALLBACK",
    "is_sitemap",
    "listed_priority",
    "sitemap_request",
]

SITEMAP_CALLBACK = "crawlq:sitemap"
"""The callback name that marks a request as a sitemap (not an identifier: no spider method
can have it)."""

MAX_NESTING = 3
"""Most levels of sitemap indexes under the first sitemap (the protocol allows one)."""

NESTING_KEY = "sitemap_nesting"
"""``meta`` key of a child sitemap: how many indexes lead to it."""

LASTMOD_KEY = "sitemap_lastmod"
"""``meta`` key of a listed URL: its ``<lastmod>`` as written."""


def sitemap_request(
    url: str,
    *,
    priority: int = 0,
    depth: int = 0,
    meta: Mapping[str, Any] | None = None,
    referrer: str | None = None,
) -> CrawlRequest:
    """A request that reads ``url`` as a sitemap (XML, index, text, gzipped or not).

    Args:
        url: Absolute http(s) URL of the sitemap.
        priority: Higher runs sooner; the URLs it lists are ranked around it
            (`listed_priority`).
        depth: Its depth, which the URLs it lists inherit (module docstring).
        meta: Carried to the request (``sitemap_nesting`` counts index levels).
        referrer: The sitemap index that lists it, if any.

    Raises:
        InvalidURL: ``url`` is not an absolute http(s) URL.
    """
    return CrawlRequest(
        url,
        priority=priority,
        depth=depth,
        callback=SITEMAP_CALLBACK,
        meta=dict(meta or {}),
        referrer=referrer,
    )


def is_sitemap(request: CrawlRequest) -> bool:
    """Whether ``request`` is to be read as a sitemap."""
    return request.callback == SITEMAP_CALLBACK


def listed_priority(base: int, sitemap_priority: float | None) -> int:
    """The crawlq priority of a URL a sitemap lists with ``<priority>`` ``sitemap_priority``.

    ``base + round(10 * p) - 5`` (halves round up), with ``p`` clamped to 0.0..1.0 and 0.5
    (the protocol's default) when absent: 0.0 -> base - 5, 0.5 -> base, 1.0 -> base + 5.

    Args:
        base: The sitemap request's priority.
        sitemap_priority: The entry's ``<priority>``, or None.
    """
    p = 0.5 if sitemap_priority is None else min(1.0, max(0.0, sitemap_priority))
    return base + int(p * 10 + 0.5) - 5
