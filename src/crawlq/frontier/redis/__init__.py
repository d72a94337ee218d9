"""The Redis frontier: one crawl job shared by workers on any number of machines."""

from __future__ import annotations

from crawlq.frontier.redis.backend import RedisFrontier
from crawlq.frontier.redis.bloom import BloomDedup
from crawlq.frontier.redis.client import INBOX_MAX_ENTRY_BYTES, InboxFilter
from crawlq.frontier.redis.keys import Keyspace

__all__ = ["INBOX_MAX_ENTRY_BYTES", "BloomDedup", "InboxFilter", "Keyspace", "RedisFrontier"]
