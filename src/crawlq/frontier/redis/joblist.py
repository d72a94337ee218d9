"""Find the jobs on a Redis server: for ``crawlq dashboard`` without ``--job``."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlq.errors import ConfigError
from crawlq.frontier.redis.errors import translate
from crawlq.frontier.redis.keys import Keyspace

__all__ = ["list_jobs"]

_PREFIX = b"crawlq:{"
_SUFFIX = b"}:job"


async def list_jobs(url: str, limit: int = 50) -> list[str]:
    """The names of up to ``limit`` jobs on the Redis at ``url``, sorted.

    A job is a ``crawlq:{JOB}:job`` hash (`Keyspace.job_info`); found with SCAN, which does
    not block the server.

    Raises:
        FrontierUnavailable: Redis does not answer.
        FrontierError: Redis refused (a login, a permission).
        ConfigError: A bad URL.
    """
    try:
        client = Redis.from_url(url, decode_responses=False)
    except ValueError as exc:
        raise ConfigError("frontier", f"bad Redis URL {url!r}: {exc}") from exc
    pattern = Keyspace.all_jobs_pattern()
    found: set[str] = set()
    try:
        async for key in client.scan_iter(match=pattern, count=1000, _type="hash"):
            raw = bytes(key)
            if raw.startswith(_PREFIX) and raw.endswith(_SUFFIX):
                found.add(raw[len(_PREFIX) : -len(_SUFFIX)].decode("utf-8", errors="replace"))
            if len(found) >= limit:
                break
    except (RedisError, OSError) as exc:
        raise translate(exc, "*") from exc
    finally:
        await client.aclose()
    return sorted(found)
