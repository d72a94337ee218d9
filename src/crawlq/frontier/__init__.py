"""Crawl frontiers: the contract (`Frontier`) and `open_frontier` to pick a backend by URL."""

from __future__ import annotations

from crawlq.clock import Clock
from crawlq.errors import ConfigError
from crawlq.frontier.base import Frontier, FrontierStats, HostPolicy, HostStats

__all__ = ["Frontier", "FrontierStats", "HostPolicy", "HostStats", "open_frontier"]


async def open_frontier(
    url: str, *, default_policy: HostPolicy | None = None, clock: Clock | None = None
) -> Frontier:
    """Open the frontier named by ``url``.

    Args:
        url: A SQLite file path or ``sqlite:///path`` (the embedded default). ``redis://`` comes
            with the distributed engine.
        default_policy: Politeness of hosts without an override.
        clock: Source of "now" (tests).

    Raises:
        ConfigError: The URL names no supported backend.
        FrontierLocked: The SQLite file is owned by another live process.
        FrontierUnavailable: The backend cannot be opened.
    """
    if url.startswith(("redis://", "rediss://")):
        raise ConfigError("frontier", f"{url}: the Redis frontier is not available in this version")
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    if "://" in path:
        raise ConfigError("frontier", f"{url}: expected a SQLite file path or sqlite:///path")
    from crawlq.frontier.sqlite import SqliteFrontier

    return await SqliteFrontier.open(path, default_policy=default_policy, clock=clock)
