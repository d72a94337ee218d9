"""The bounds of a request's fields: priority, depth, and what a JSON request may hold.

`crawlq.request.CrawlRequest` clamps a priority to `PRIORITY_LIMIT` and refuses a depth over
`MAX_DEPTH`; `crawlq.request.CrawlRequest.from_json` (untrusted text: the Redis inbox, task
messages) refuses anything out of these bounds.
"""

from __future__ import annotations

__all__ = [
    "MAX_DEPTH",
    "MAX_JSON_NESTING",
    "MAX_REFERRER_CHARS",
    "MAX_URL_LENGTH",
    "PRIORITY_LIMIT",
]

PRIORITY_LIMIT = 2**19 - 1
"""Largest priority magnitude, 524,287: a request's priority is clamped to
``-PRIORITY_LIMIT..PRIORITY_LIMIT`` (the Redis frontier's queue scores hold it exactly), and a
JSON request (`CrawlRequest.from_json`: the inbox, task messages) outside that range is
refused."""

MAX_DEPTH = 2**31 - 1
"""Largest request depth (the stores keep it in a 32-bit integer column)."""

MAX_JSON_NESTING = 32
"""Deepest nesting of arrays and objects accepted in a JSON request (`CrawlRequest.from_json`),
checked by a linear scan before the JSON is parsed, so a deeply nested entry never reaches the
recursive parser."""

MAX_URL_LENGTH = 2083
"""Longest URL crawlq follows, in characters (Internet Explorer's historical limit, which
sites keep to; Scrapy's URLLengthMiddleware default). Its home is here, at the bottom of the
layers, so that requests and `crawlq.rules.scope` (which owns the check,
`crawlq.rules.scope.url_too_long`) share one number."""

MAX_REFERRER_CHARS = MAX_URL_LENGTH
"""Longest ``referrer`` a JSON request (`CrawlRequest.from_json`) may carry, in characters:
the longest URL crawlq follows."""
