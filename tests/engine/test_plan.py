"""crawlq.engine.plan: one planning step turns options, spider and seeds into a job's settings."""

from __future__ import annotations

import os

import pytest

from crawlq.engine.plan import plan_crawl, plan_seed, spider_scope
from crawlq.errors import ConfigError, InvalidURL
from crawlq.request import CrawlRequest
from crawlq.request.crawl_request import MAX_URL_LENGTH
from crawlq.settings import Settings
from crawlq.spider import Spider


class Docs(Spider):
    allowed_domains = ["docs.example"]


def settings(**cli: object) -> Settings:
    return Settings.build(cli={"store": "crawl.db", **cli}, env={})


def test_domains_come_from_settings_then_spider_then_seeds() -> None:
    seeds = ["http://a.example:8080/", "http://b.example/x", "http://a.example:8080/y"]
    assert plan_crawl(settings(), seeds).settings.allowed_domains == (
        "a.example:8080",
        "b.example",
    )
    assert plan_crawl(settings(), seeds, Docs).settings.allowed_domains == ("docs.example",)
    given = settings(allowed_domains=["c.example"])
    assert plan_crawl(given, seeds, Docs).settings.allowed_domains == ("c.example",)


def test_seed_plans_like_crawl_without_a_spider() -> None:
    requests = [CrawlRequest("http://a.example:8080/"), CrawlRequest("http://b.example/")]
    planned = plan_seed(settings(), [r.host for r in requests])
    assert planned.allowed_domains == ("a.example:8080", "b.example")
    assert planned.seed_hosts == ("a.example", "b.example")
    assert planned.store == os.path.abspath("crawl.db")


def test_crawl_plan_sets_store_seed_hosts_and_job_name() -> None:
    plan = plan_crawl(settings(frontier="redis://127.0.0.1:6379/0"), ["http://a.example/"])
    assert plan.settings.store == os.path.abspath("crawl.db")
    assert plan.settings.seed_hosts == ("a.example",)
    assert plan.settings.job is not None and plan.settings.job.startswith("a.example-")
    assert [r.url for r in plan.start_requests] == ["http://a.example/"]
    assert plan_crawl(settings(), ["http://a.example/"]).settings.job is None  # no frontier


def test_crawl_plan_refuses_bad_seeds() -> None:
    with pytest.raises(ConfigError, match="no seed URLs"):
        plan_crawl(settings(), [])
    with pytest.raises(InvalidURL, match=f"longer than {MAX_URL_LENGTH}"):
        plan_crawl(settings(), ["http://a.example/" + "x" * MAX_URL_LENGTH])


def test_spider_scope_of_a_bound_job() -> None:
    job = settings(seed_hosts=["seed.example"])
    assert spider_scope(job, Spider()).allowed_domains == {"seed.example"}
    assert spider_scope(job, Docs()).allowed_domains == {"docs.example"}
    assert spider_scope(settings(), Spider()).allowed_domains == frozenset()
