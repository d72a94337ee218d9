"""The Celery engine's state joins the job's id: a lost job is never rebuilt or reported done."""

from __future__ import annotations

import pytest
import redis

from crawlq.celery.runtime.state import CeleryState
from crawlq.errors import JobGone
from crawlq.frontier.redis import Keyspace
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import HostPolicy


def drop_keys(redis_url: str, job: str) -> int:
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=Keyspace(job).pattern()))
        for key in keys:
            client.unlink(key)
        return len(keys)
    finally:
        client.close()


async def test_a_lost_job_refuses_writes_and_counts_and_is_not_recreated(
    redis_url: str, job: str
) -> None:
    state = await CeleryState.open(redis_url, job)  # a task of a job nobody seeded: created
    try:
        assert state.job_id
        seed = CrawlRequest("http://127.0.0.1:9/a")
        assert await state.admit([(seed, "seed")], run=False) == [True]
        assert (await state.counts()).pending == 1
        assert drop_keys(redis_url, job) > 0  # a Redis restart without persistence
        with pytest.raises(JobGone, match="is gone"):
            await state.counts()  # not "0 pending": the crawl is not done, it is lost
        with pytest.raises(JobGone):
            await state.admit([(seed, "seed")], run=True)
        with pytest.raises(JobGone):
            await state.acquire(seed.host, 1, HostPolicy(0, 1), 5.0)
        assert drop_keys(redis_url, job) == 0  # nothing written
        with pytest.raises(JobGone):
            await CeleryState.open(redis_url, job, expect_id=state.job_id)
        assert drop_keys(redis_url, job) == 0
    finally:
        await state.close()
