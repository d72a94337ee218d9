"""The Redis frontier's job identity and its one home for Redis errors.

A job gets a random id when it is created; every script that writes checks it first, so a
client never writes into a job it did not join (a Redis restart without persistence, deleted
keys, or a new job of the same name). Redis errors become crawlq errors in one place
(`crawlq.frontier.redis.errors.translate`): transient ones `FrontierUnavailable`, the rest
permanent.
"""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    NoScriptError,
    OutOfMemoryError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from crawlq.errors import FrontierError, FrontierFull, FrontierUnavailable, JobGone
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.frontier.redis.errors import translate
from crawlq.frontier.redis.scripts import SCRIPTS
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import HostPolicy

POLICY = HostPolicy(0.0, 10)


def keys_of(redis_url: str, job: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        return list(client.scan_iter(match=Keyspace(job).pattern()))
    finally:
        client.close()


def drop_keys(redis_url: str, job: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=Keyspace(job).pattern()):
            client.unlink(key)
    finally:
        client.close()


@pytest.mark.parametrize(
    ("exc", "kind", "words"),
    [
        (RedisConnectionError("Connection refused"), FrontierUnavailable, "unavailable"),
        (BusyLoadingError("Redis is loading", status_code="LOADING"), FrontierUnavailable, ""),
        (ResponseError("BUSY Redis is busy running a script"), FrontierUnavailable, "BUSY"),
        (TimeoutError("timed out"), FrontierUnavailable, "timed out"),
        (OutOfMemoryError("command not allowed", status_code="OOM"), FrontierFull, "maxmemory"),
        (ResponseError("OOM command not allowed when used memory"), FrontierFull, "maxmemory"),
        (AuthenticationError("invalid password"), FrontierError, "login"),
        (ResponseError("WRONGTYPE Operation against a key"), FrontierError, "WRONGTYPE"),
        (NoScriptError("No matching script", status_code="NOSCRIPT"), FrontierError, "NOSCRIPT"),
        (ResponseError("CRAWLQ_JOB_GONE - script: abc"), JobGone, "is gone"),
        (ResponseError("CRAWLQ_JOB_GONE 1234 script: abc"), JobGone, "replaced"),
    ],
)
def test_translate_separates_transient_from_permanent(
    exc: Exception, kind: type[FrontierError], words: str
) -> None:
    got = translate(exc, "docs", "abcd")
    assert type(got) is kind
    assert words in str(got) and "'docs'" in str(got)
    assert isinstance(got, FrontierUnavailable) == (kind is FrontierUnavailable)


def test_translate_never_shows_a_password() -> None:
    got = translate(RedisConnectionError("cannot reach redis://:s3cret@db:6379/0"), "docs")
    assert "s3cret" not in str(got)


def test_every_writing_script_checks_the_job_first() -> None:
    readers = {"job_open", "robots_get", "inspect"}  # inspect returns the id it found
    for name, script in SCRIPTS.items():
        assert script.checks_job == (name not in readers), name


async def test_a_job_gets_an_id_that_joining_clients_share(redis_url: str, job: str) -> None:
    a = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    b = await RedisFrontier.open(redis_url, job, default_policy=POLICY)
    try:
        assert a.job_id and a.job_id == b.job_id
        assert await b.push([CrawlRequest("http://a.example/1")]) == 1
    finally:
        await a.close()
        await b.close()


async def test_a_deleted_job_refuses_every_write_and_nothing_is_written(
    redis_url: str, job: str
) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        await f.push([CrawlRequest("http://a.example/1")])
        [lease] = await f.lease(1, "w", 30)
        drop_keys(redis_url, job)  # the job is gone (or Redis restarted empty)
        calls = [
            lambda: f.push([CrawlRequest("http://a.example/2")]),
            lambda: f.lease(1, "w", 30, wait_s=1.0),
            lambda: f.ack([lease]),
            lambda: f.renew([lease], 30, "w"),
            lambda: f.set_host_policy("a.example", HostPolicy(1.0, 1)),
            lambda: f.job_settings({"x": 1}),
            lambda: f.stats(),
            lambda: f.drain_inbox("w"),
        ]
        for call in calls:
            with pytest.raises(JobGone, match="is gone") as caught:
                await call()
            assert not isinstance(caught.value, FrontierUnavailable)
        assert keys_of(redis_url, job) == []
    finally:
        await f.close()


async def test_a_job_replaced_by_a_new_one_of_the_same_name_is_not_joined(
    redis_url: str, job: str
) -> None:
    old = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    try:
        drop_keys(redis_url, job)
        new = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
        await new.close()
        assert new.job_id != old.job_id
        with pytest.raises(JobGone, match="replaced") as caught:
            await old.push([CrawlRequest("http://a.example/1")])
        assert caught.value.found == new.job_id
    finally:
        await old.close()


async def test_a_worker_of_a_job_never_seeded_writes_nothing(redis_url: str, job: str) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY)
    try:
        assert f.job_id is None
        with pytest.raises(JobGone):
            await f.push([CrawlRequest("http://a.example/1")])
        assert keys_of(redis_url, job) == []
    finally:
        await f.close()


async def test_a_job_made_before_ids_gets_one_when_joined(redis_url: str, job: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.hset(Keyspace(job).job_info, "dedup", "set")
    client.close()
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY)
    try:
        assert f.job_id
        assert await f.push([CrawlRequest("http://a.example/1")]) == 1
    finally:
        await f.close()
