"""The Redis frontier: one crawl job shared by workers on any number of machines."""

from __future__ import annotations

from crawlq.frontier.redis.backend import BloomDedup, RedisFrontier
from crawlq.frontier.redis.keys import Keyspace

__all__ = ["BloomDedup", "Keyspace", "RedisFrontier"]
