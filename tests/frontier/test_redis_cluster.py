"""The Redis frontier on a Redis Cluster, as it is before issue 26's sharded jobs.

A job's keys share one hash tag, so they live on the one master serving its slot: pointed at
that master, crawlq works; pointed at any other node, Redis answers ``MOVED``, which crawlq
reports as one permanent error naming the frontier URL, the slot's node, and that Redis Cluster
is not supported yet, without writing anything anywhere. The cluster is
`tests.services.RedisCluster` (3 masters, 3 replicas, private ports).
"""

from __future__ import annotations

import pytest
import redis

from crawlq.errors import FrontierError, FrontierUnavailable
from crawlq.frontier.redis import Keyspace, RedisFrontier
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import HostPolicy
from tests.services import RedisCluster

pytestmark = pytest.mark.e2e  # starts six redis-server processes

POLICY = HostPolicy(0.0, 10)


def _dbsize(cluster: RedisCluster, port: int) -> int:
    client = redis.Redis.from_url(cluster.url(port))
    try:
        return int(client.dbsize())
    finally:
        client.close()


def test_the_fixture_is_three_masters_serving_every_slot(redis_cluster: RedisCluster) -> None:
    masters = redis_cluster.masters()
    assert len(masters) == 3
    slots = sorted(s for ranges in masters.values() for start, end in ranges for s in (start, end))
    served = sum(end - start + 1 for ranges in masters.values() for start, end in ranges)
    assert served == 16384 and slots[0] == 0 and slots[-1] == 16383
    assert len(redis_cluster.live_ports()) == 6


async def test_a_node_without_the_jobs_slot_is_one_clear_permanent_error(
    redis_cluster: RedisCluster,
) -> None:
    job = "cluster-moved"
    key = Keyspace(job).job_info
    owner = redis_cluster.owner_of(key)
    other = next(port for port in redis_cluster.masters() if port != owner)
    url = redis_cluster.url(other)
    with pytest.raises(FrontierError) as caught:
        await RedisFrontier.open(url, job, default_policy=POLICY, create=True)
    message = str(caught.value)
    assert not isinstance(caught.value, FrontierUnavailable)  # waiting would not fix it
    assert url in message and f"job {job!r}" in message
    assert "does not support Redis Cluster yet" in message
    assert f"slot {redis_cluster.slot_of(key)} (127.0.0.1:{owner} does)" in message
    assert all(_dbsize(redis_cluster, port) == 0 for port in redis_cluster.masters())


async def test_on_the_master_serving_its_slot_a_job_works_and_a_worker_elsewhere_is_told(
    redis_cluster: RedisCluster,
) -> None:
    job = "cluster-owner"
    owner = redis_cluster.owner_of(Keyspace(job).job_info)
    f = await RedisFrontier.open(redis_cluster.url(owner), job, default_policy=POLICY, create=True)
    try:
        assert await f.push([CrawlRequest("http://a.test/1"), CrawlRequest("http://b.test/2")]) == 2
        leases = await f.lease(2, "w", 30)
        assert sorted(lease.request.url for lease in leases) == [
            "http://a.test/1",
            "http://b.test/2",
        ]
        assert await f.ack(leases) == 2
        assert (await f.stats()).done == 2
        other = next(port for port in redis_cluster.masters() if port != owner)
        stray = RedisFrontier(
            redis.asyncio.Redis.from_url(redis_cluster.url(other)), job, f.politeness,
            job_id=f.job_id,
        )  # fmt: skip
        try:
            with pytest.raises(FrontierError, match="does not support Redis Cluster yet"):
                await stray.push([CrawlRequest("http://a.test/3")])
        finally:
            await stray.close()
    finally:
        await f.drop()
        await f.close()
