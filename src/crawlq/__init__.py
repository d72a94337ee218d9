"""crawlq: a distributed web crawler and scraper built around a shared crawl frontier."""

from __future__ import annotations

__version__ = "0.1.0"
"""The one home of the version: the package metadata (hatch, pyproject.toml), ``crawlq
--version`` and the default User-Agent (`crawlq.settings.DEFAULT_USER_AGENT`) read it."""

__all__ = ["__version__"]
