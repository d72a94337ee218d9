"""The Celery engine's configuration: priority mapping, queues, JSON only, task entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlq.celery.crawl import celery_settings
from crawlq.celery.runtime.config import (
    broker_priority,
    celery_config,
    clamp_priority,
    dedup_redis_url,
    visibility_timeout_s,
)
from crawlq.celery.runtime.wire import Entry, parse_entries
from crawlq.errors import ConfigError
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from tests.conftest import run_crawlq

REDIS = "redis://127.0.0.1:6379/3"
AMQP = "amqp://guest:guest@127.0.0.1:5672//"


def settings(**cli: object) -> Settings:
    return Settings.build(env={}, cli=cli)


def test_higher_crawlq_priority_is_served_first_on_each_broker() -> None:
    # Redis serves 0 first; AMQP serves the highest first.
    assert [broker_priority(p, REDIS) for p in (9, 5, 0)] == [0, 4, 9]
    assert [broker_priority(p, AMQP) for p in (9, 5, 0)] == [9, 5, 0]
    assert [clamp_priority(p) for p in (-3, None, 4, 12)] == [0, 0, 4, 9]


def test_redis_broker_gets_ten_priority_steps_and_amqp_a_priority_queue() -> None:
    on_redis = celery_config(settings(broker_url=REDIS, celery_queue="q1"))
    assert on_redis["broker_transport_options"]["priority_steps"] == list(range(10))
    assert on_redis["task_default_priority"] == 9  # crawlq priority 0 on Redis
    (queue,) = on_redis["task_queues"]
    assert queue.name == "q1" and not queue.queue_arguments
    on_amqp = celery_config(settings(broker_url=AMQP))
    (queue,) = on_amqp["task_queues"]
    assert queue.queue_arguments == {"x-max-priority": 10}
    assert on_amqp["task_default_priority"] == 0


def test_json_only_late_acks_and_no_results() -> None:
    conf = celery_config(settings(broker_url=REDIS))
    assert conf["accept_content"] == ["json"] and conf["task_serializer"] == "json"
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"]
    assert conf["task_ignore_result"] and conf["worker_prefetch_multiplier"] == 1


def test_visibility_timeout_covers_fetches_and_the_longest_retry_wait() -> None:
    assert visibility_timeout_s(settings(timeout_s=10, retry_max_delay_s=60)) == 100
    assert visibility_timeout_s(settings(visibility_timeout_s=7)) == 7
    conf = celery_config(settings(broker_url=REDIS, visibility_timeout_s=7))
    assert conf["broker_transport_options"]["visibility_timeout"] == 7


def test_dedup_redis_defaults_to_a_redis_broker_and_is_required_with_amqp() -> None:
    assert dedup_redis_url(settings(broker_url=REDIS)) == REDIS
    assert dedup_redis_url(settings(broker_url=AMQP, frontier=REDIS)) == REDIS
    with pytest.raises(ConfigError, match="frontier"):
        dedup_redis_url(settings(broker_url=AMQP))


def test_unsupported_settings_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="broker_url"):
        celery_settings(settings())
    with pytest.raises(ConfigError, match="max_pages"):
        celery_settings(settings(broker_url=REDIS, max_pages=5))


def test_entries_round_trip_and_bad_ones_are_dropped() -> None:
    entry = Entry(CrawlRequest("http://a.test/x", priority=3, depth=2), attempt=2, retry=True)
    assert Entry.from_wire(entry.to_wire()) == entry
    parsed = parse_entries([entry.to_wire(), ["not json"], ['{"url": "ftp://x"}', 1, False]])
    assert parsed == [entry]
    with pytest.raises(ConfigError):
        parse_entries("http://a.test/")


def test_cli_names_what_the_celery_engine_is_missing(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    no_broker = run_crawlq(
        "crawl", "http://127.0.0.1:9/", "--engine", "celery", "--store", store, check=False
    )
    assert no_broker.returncode == 2 and "broker_url" in no_broker.stderr
    no_redis = run_crawlq(
        "crawl", "http://127.0.0.1:9/", "--engine", "celery", "--broker", AMQP, "--store", store,
        check=False,
    )  # fmt: skip
    assert no_redis.returncode == 2 and "--frontier redis://" in no_redis.stderr
    pages = run_crawlq(
        "crawl", "http://127.0.0.1:9/", "--engine", "celery", "--broker", REDIS,
        "--store", store, "--max-pages", "3", check=False,
    )  # fmt: skip
    assert pages.returncode == 2 and "max_pages" in pages.stderr


def test_an_unreachable_or_refusing_broker_is_one_line_and_seeds_nothing(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    import redis

    from crawlq.frontier.redis import Keyspace

    for broker in ("amqp://guest:guest@127.0.0.1:9//", "amqp://nobody:wrong@127.0.0.1:5672//"):
        proc = run_crawlq(
            "crawl", "http://127.0.0.1:9/index.html", "--engine", "celery", "--broker", broker,
            "--frontier", redis_url, "--job", job, "--store", str(tmp_path / "s.db"),
            check=False,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        assert "cannot reach the Celery broker amqp://127.0.0.1:" in proc.stderr
        assert "Traceback" not in proc.stderr and "wrong" not in proc.stderr  # no password
    client = redis.Redis.from_url(redis_url)
    try:  # the job was never created, so the same command with a fixed broker can run
        assert list(client.scan_iter(match=Keyspace(job).pattern())) == []
    finally:
        client.close()


POISON: list[object] = [
    ['{"url": "http://a.test/1", "priority": 1e999}', 1, False],
    ['{"url": "http://a.test/2", "depth": 1e999}', 1, False],
    ["[" * 100_000 + "]" * 100_000, 1, False],
    ['{"url": "http://a.test/3", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}"],
    ['{"url": "http://a.test/4"}', 1e999, False],
    ['{"url": "http://a.test/5"}', "2", False],
    ['{"url": "http://a.test/6"}', 1, "yes"],
    ['{"url": "http://a.test/7", "pad": "' + "x" * 70_000 + '"}'],
    [None],
    [],
    42,
]


def test_poison_task_entries_are_dropped_one_by_one() -> None:
    good = Entry(CrawlRequest("http://a.test/ok"))
    assert parse_entries([*POISON, good.to_wire()]) == [good]


def test_garbage_task_arguments_never_raise_out_of_the_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from crawlq.celery import make_app
    from crawlq.celery.runtime.jobs import Runtimes

    def no_runtime(*args: object) -> None:
        raise AssertionError(f"a garbage task reached the runtime: {args!r:.200}")

    monkeypatch.setattr(Runtimes, "run", no_runtime)
    app = make_app(settings(broker_url=REDIS))
    tasks = app.crawlq
    tasks.scrape(123)
    tasks.scrape("http://a.test/x", depth=1e999)
    tasks.scrape("http://a.test/x", priority=float("nan"), depth=True)
    tasks.scrape("http://a.test/x", job=["not", "a", "name"])
    tasks.scrape("http://a.test/x", job="bad}{name")
    tasks.scrape_many("j", POISON)
    tasks.scrape_many("j", "not a list")
    tasks.scrape_many({"job": 1}, POISON)
