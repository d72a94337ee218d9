from __future__ import annotations

import pytest

from crawlq.errors import InvalidURL
from crawlq.request import CrawlRequest
from crawlq.request.crawl_request import MAX_URL_LENGTH
from crawlq.rules.scope import FilterReason, Scope, check_url_length, crawl_domains, url_too_long


def req(url: str, depth: int = 1) -> CrawlRequest:
    return CrawlRequest(url, depth=depth)


def test_allowed_domains_include_subdomains_and_ignore_ports() -> None:
    scope = Scope(allowed_domains=["example.com", "127.0.0.1:8000"])
    assert scope.check(req("http://example.com/a")) is None
    assert scope.check(req("http://docs.example.com:8080/a")) is None
    assert scope.check(req("http://127.0.0.1:9999/a")) is None
    assert scope.check(req("http://badexample.com/")) is FilterReason.OFFSITE
    assert scope.check(req("http://example.com.evil.test/")) is FilterReason.OFFSITE
    assert scope.check(req("http://127.0.0.2:8000/")) is FilterReason.OFFSITE


def test_no_allowed_domains_allows_every_host() -> None:
    assert Scope().check(req("http://anything.test/")) is None


def test_crawl_domains_takes_settings_then_spider_then_seed_hosts() -> None:
    assert crawl_domains(("a.test",), ("b.test",), ("c.test",)) == ("a.test",)
    assert crawl_domains((), ["b.test"], ("c.test",)) == ("b.test",)
    assert crawl_domains((), [], ("c.test:81", "d.test", "c.test:81")) == ("c.test:81", "d.test")
    assert crawl_domains((), [], ()) == ()


def test_url_length_is_one_rule() -> None:
    at_limit = "http://a.test/" + "x" * (MAX_URL_LENGTH - len("http://a.test/"))
    assert not url_too_long(at_limit)
    assert url_too_long(at_limit + "x")
    check_url_length(at_limit)
    with pytest.raises(InvalidURL, match=f"longer than {MAX_URL_LENGTH}"):
        check_url_length(at_limit + "x")
    assert Scope().check(req(at_limit + "x")) is FilterReason.URL_TOO_LONG


def test_max_depth() -> None:
    scope = Scope(max_depth=2)
    assert scope.check(req("http://a.test/", depth=2)) is None
    assert scope.check(req("http://a.test/", depth=3)) is FilterReason.MAX_DEPTH


def test_include_and_exclude() -> None:
    scope = Scope(include=[r"/docs/"], exclude=[r"\?print=1$"])
    assert scope.check(req("http://a.test/docs/x")) is None
    assert scope.check(req("http://a.test/blog/x")) is FilterReason.NOT_INCLUDED
    assert scope.check(req("http://a.test/docs/x?print=1")) is FilterReason.EXCLUDED


def test_url_length_limit() -> None:
    assert Scope().check(req("http://a.test/" + "x" * 3000)) is FilterReason.URL_TOO_LONG
