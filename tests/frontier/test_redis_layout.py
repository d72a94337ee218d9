"""The Redis frontier's key layout (issue 26): slim records, and jobs of the older layout.

A request's record is its queue score and its JSON (no host line, no ``scores`` hash), so a
request released, reaped, retried or replayed finds its place in its host's queue from its
record alone. A job created in layout 1 that still holds requests is refused with one message
naming the job; `crawlq.frontier.redis.jobs.JobAdmin` can still delete it.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis

from crawlq.errors import FrontierError
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.frontier.redis.jobs import JobAdmin
from crawlq.frontier.redis.keys import LAYOUT
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import HostPolicy

POLICY = HostPolicy(0.0, 10)


def test_job_open_writes_the_layout_keys_py_describes() -> None:
    source = resources.files("crawlq.frontier.redis").joinpath("job_open.lua").read_text()
    found = re.search(r'^local LAYOUT = "(\d+)"', source, re.M)
    assert found is not None and int(found.group(1)) == LAYOUT


async def test_a_record_is_its_score_and_json_and_no_scores_hash_is_kept(
    redis_url: str, job: str
) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    client = redis.Redis.from_url(redis_url)
    try:
        low, high = CrawlRequest("http://a.test/low"), CrawlRequest("http://a.test/hi", priority=3)
        assert await f.push([low, high]) == 2
        k = Keyspace(job)
        assert client.hget(k.job_info, "layout") == str(LAYOUT).encode()
        assert not client.exists(k.scores)
        for req in (low, high):
            record = bytes(client.hget(k.reqs, req.fingerprint))  # type: ignore[arg-type]
            score, _, text = record.partition(b"\n")
            assert float(score) == client.zscore(k.queue("a.test"), req.fingerprint)
            assert CrawlRequest.from_json(text) == req
        [first] = await f.lease(1, "w", 30)
        assert first.request == high
        assert await f.release([first]) == 1  # back to its place: still first
        assert [lease.request for lease in await f.lease(2, "w", 30)] == [high, low]
    finally:
        client.close()
        await f.close()


async def test_a_record_whose_score_is_garbled_still_goes_back_to_the_queue(
    redis_url: str, job: str
) -> None:
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    client = redis.Redis.from_url(redis_url)
    try:
        req = CrawlRequest("http://a.test/x")
        await f.push([req])
        [lease] = await f.lease(1, "w", 30)
        client.hset(Keyspace(job).reqs, req.fingerprint, b"not a score\n" + req.to_json().encode())
        assert await f.release([lease]) == 1  # shared state: a bad score must not fail a step
        [again] = await f.lease(1, "w", 30)
        assert again.request == req
    finally:
        client.close()
        await f.close()


def _layout_1_job(redis_url: str, job: str, *, queued: bool) -> None:
    """Write a job as crawlq wrote it before issue 26 (layout 1)."""
    k = Keyspace(job)
    req = CrawlRequest("http://a.test/old")
    client = redis.Redis.from_url(redis_url)
    try:
        client.hset(k.job_info, mapping={"id": "0123456789abcdef", "dedup": "set"})
        client.sadd(k.seen, req.fingerprint)
        client.hset(k.stats, mapping={"seen": 1, "seq": 1, "queued": int(queued)})
        if queued:
            client.hset(k.reqs, req.fingerprint, f"a.test\n{req.to_json()}")
            client.hset(k.scores, req.fingerprint, "1")
            client.zadd(k.queue("a.test"), {req.fingerprint: 1})
            client.zadd(k.ready, {"a.test": 0})
    finally:
        client.close()


@pytest.mark.parametrize("create", [False, True])
async def test_a_job_of_the_older_layout_is_refused_naming_it(
    redis_url: str, job: str, create: bool
) -> None:
    _layout_1_job(redis_url, job, queued=True)
    with pytest.raises(FrontierError) as caught:
        await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=create)
    message = str(caught.value)
    assert f"job {job!r}" in message and "layout 1" in message
    assert f"crawlq job delete {job}" in message
    admin = JobAdmin.open(redis_url)
    try:
        assert await admin.delete(job) > 0  # the way out the message names works
    finally:
        await admin.close()
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY, create=True)
    await f.close()


async def test_a_job_of_the_older_layout_with_no_request_left_is_joined(
    redis_url: str, job: str
) -> None:
    _layout_1_job(redis_url, job, queued=False)
    f = await RedisFrontier.open(redis_url, job, default_policy=POLICY)
    try:
        assert f.job_id == "0123456789abcdef"
        assert await f.push([CrawlRequest("http://a.test/old")]) == 0  # its seen set holds
        assert await f.push([CrawlRequest("http://a.test/new")]) == 1
        [lease] = await f.lease(1, "w", 30)
        assert lease.request.url == "http://a.test/new"
    finally:
        await f.close()
