"""A Celery worker process's heartbeat is written into a job only while the job exists.

`Heartbeat.add` beats at once (then every interval, from its thread), so each case below
sees exactly one beat of its own; the interval is an hour, so the thread adds none.
"""

from __future__ import annotations

from pathlib import Path

import redis

from crawlq.celery.runtime.heartbeat import Heartbeat, process_id
from crawlq.frontier.redis import Keyspace
from tests.conftest import run_crawlq


def test_a_heartbeat_is_recorded_in_a_job_that_exists(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    run_crawlq("seed", "--frontier", redis_url, "--job", job, "--allow-domain", "example.com",
               "--store", str(tmp_path / "s.db"))  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    beat = Heartbeat(3600)
    try:
        beat.add(redis_url, job)
        assert client.zscore(Keyspace(job).workers, process_id()) is not None
    finally:
        beat.stop()
        client.close()


def test_a_heartbeat_after_job_delete_does_not_recreate_the_jobs_keys(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    run_crawlq("seed", "--frontier", redis_url, "--job", job, "--allow-domain", "example.com",
               "--store", str(tmp_path / "s.db"))  # fmt: skip
    run_crawlq("job", "delete", job, "--frontier", redis_url)
    client = redis.Redis.from_url(redis_url)
    beat = Heartbeat(3600)
    try:
        beat.add(redis_url, job)  # a worker process still running the deleted job's tasks
        assert client.exists(Keyspace(job).workers) == 0
        assert list(client.scan_iter(match=Keyspace(job).pattern())) == []
    finally:
        beat.stop()
        client.close()
