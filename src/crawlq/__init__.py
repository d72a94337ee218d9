"""crawlq: a distributed web crawler and scraper built around a shared crawl frontier."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
