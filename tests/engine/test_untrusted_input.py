"""What a web page or shared state can send that once ended as internal errors or crashes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from crawlq.engine.job import bind_job
from crawlq.errors import ConfigError
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.spider import Response, Spider
from crawlq.testing import RequestLog

from .conftest import assert_nothing_lost, crawl


@contextlib.asynccontextmanager
async def raw_redirect(location: bytes) -> AsyncIterator[str]:
    """A server whose every answer is a 302 to ``location`` (raw bytes, as sent)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n"
        writer.write(head + b"Connection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/start"
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    "location",
    [b"http://[::1/x", b"http://\xff\xfe/", b"http://h:99999/"],
    ids=["ipv6", "host", "port"],
)  # raw bytes in a path are followed, percent-encoded, as browsers do (test_url_rules.py)
async def test_a_location_that_cannot_be_resolved_is_a_bad_redirect(
    db: Path, location: bytes
) -> None:
    async with raw_redirect(location) as url:
        r = await crawl(db, [url], obey_robots=False)
    assert_nothing_lost(r, [url])
    assert (r.dead[url].reason, r.dead[url].attempts) == ("bad_redirect", 1)


class HasHelpers(Spider):
    """Its seed page asks for the next page with ``follow_with`` as the callback name."""

    follow_with = "parse"

    def parse(self, response: Response) -> Iterator[Any]:
        if response.url.endswith("/status/200"):
            yield CrawlRequest(response.url + "?next", callback=self.follow_with)
        else:
            yield {"ok": response.url}

    def _secret_helper(self, response: Response) -> Iterator[Any]:
        yield {"leaked": True}


@pytest.mark.parametrize("callback", ["__init__", "_secret_helper", "start_requests"])
async def test_a_request_names_only_public_spider_callbacks(
    db: Path, base: str, callback: str
) -> None:
    spider = type("Named", (HasHelpers,), {"follow_with": callback})
    url = f"{base}/status/200"
    r = await crawl(db, [url], spider)
    error = r.pages[url + "?next"].error
    assert error is not None
    assert error.endswith(f"spider Named has no callback {callback!r}")
    assert r.items == []


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_host_down_with_robots_on_ends_by_its_breaker_not_by_remembered_failures(
    db: Path, log: RequestLog
) -> None:
    """QA: with robots.txt on, a remembered robots.txt failure dead-lettered every page
    (robots_unreachable) after one or two connection attempts; it must count as no attempt."""
    base = f"http://127.0.0.1:{closed_port()}"
    seeds = [f"{base}/p{i}" for i in range(30)]
    r = await crawl(
        db, seeds, delay_s=0, host_concurrency=16, concurrency=16, retry_delay_s=0.01,
        host_backoff_s=0.02, breaker_failures=3, breaker_parks=2, breaker_cooldown_s=0.05,
    )  # fmt: skip
    assert_nothing_lost(r, seeds)
    reasons = {url: d.reason for url, d in r.dead.items()}
    assert sum(1 for reason in reasons.values() if reason == "host_unreachable") >= 25
    assert set(reasons.values()) <= {"host_unreachable", "robots_unreachable"}


@pytest.mark.parametrize(
    "raw",
    [b"\xff{not json", b"[" * 100_000, b'{"delay_s": 1e308}', b'{"host_concurrency": 0}'],
    ids=["binary", "deep", "huge", "zero"],
)
async def test_corrupt_job_settings_in_redis_are_one_clear_error(
    redis_url: str, job: str, raw: bytes
) -> None:
    import redis.asyncio as aioredis

    frontier = await RedisFrontier.open(redis_url, job, create=True)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.hset(Keyspace(job).job_info, "settings", raw)
        with pytest.raises(ConfigError) as info:
            await bind_job(frontier, Settings(job=job, frontier=redis_url), create=False)
        assert "job" in str(info.value)
    finally:
        await client.aclose()
        await frontier.close()


@pytest.mark.parametrize("own", [None, "mine.py:Mine"], ids=["none-given", "another-given"])
async def test_a_spider_written_into_the_job_settings_is_refused_without_advice_to_run_it(
    redis_url: str, job: str, tmp_path: Path, own: str | None
) -> None:
    """Whoever can write the job's keys names the spider: the refusal says the job names a
    spider this process was not configured with and that its own configuration must name
    one, and never offers the stranger's path back as a flag to give."""
    import json

    import redis.asyncio as aioredis

    planted = str(tmp_path / "evil.py") + ":Evil"
    seeder = Settings(job=job, frontier=redis_url)
    frontier = await RedisFrontier.open(redis_url, job, create=True)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await bind_job(frontier, seeder, runs_spider=False)
        key = Keyspace(job).job_info
        stored = json.loads(cast(bytes, await client.hget(key, "settings")))
        await client.hset(key, "settings", json.dumps({**stored, "spider": planted}))
        worker = Settings(job=job, frontier=redis_url, spider=own)
        if own is not None:
            worker = dataclasses.replace(worker, explicit=frozenset({"spider"}))
        with pytest.raises(ConfigError) as info:
            await bind_job(frontier, worker, create=False)
    finally:
        await client.aclose()
        await frontier.close()
    message = str(info.value)
    assert f"names spider {planted!r}, which this process was not configured with" in message
    assert "this process's own configuration must name it" in message
    given = "no --spider" if own is None else f"spider {str(Path(own).absolute())!r}"
    assert f"(it was given {given})" in message
    assert "give --spider" not in message.lower()
    assert f"--spider {planted}" not in message and f"--spider '{planted}'" not in message
