"""Errors of the result stores (`crawlq.store`)."""

from __future__ import annotations

from crawlq.errors.base import CrawlqError

__all__ = [
    "StoreError",
    "StoreUnavailable",
]


class StoreError(CrawlqError):
    """Base for result store errors."""


class StoreUnavailable(StoreError):
    """The store backend cannot be reached; callers keep results and retry."""
