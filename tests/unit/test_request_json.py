"""`CrawlRequest.from_json` on untrusted text: every malformed request is a ValueError."""

from __future__ import annotations

import json

import pytest

from crawlq.request import MAX_DEPTH, MAX_JSON_NESTING, PRIORITY_LIMIT, CrawlRequest

URL = "http://a.test/x"


@pytest.mark.parametrize(
    "text",
    [
        '{"url": "http://a.test/x", "priority": 1e999}',
        '{"url": "http://a.test/x", "depth": 1e999}',
        '{"url": "http://a.test/x", "priority": NaN}',
        '{"url": "http://a.test/x", "priority": -Infinity}',
        '{"url": "http://a.test/x", "priority": true}',
        '{"url": "http://a.test/x", "priority": 1.0}',
        '{"url": "http://a.test/x", "priority": "5"}',
        '{"url": "http://a.test/x", "depth": -1}',
        '{"url": "http://a.test/x", "depth": false}',
        '{"url": "http://a.test/x", "meta": {"k": NaN}}',
        '{"url": "http://a.test/x", "priority": ' + "9" * 5000 + "}",
        json.dumps({"url": URL, "priority": PRIORITY_LIMIT + 1}),
        json.dumps({"url": URL, "priority": -PRIORITY_LIMIT - 1}),
        json.dumps({"url": URL, "depth": MAX_DEPTH + 1}),
        '{"url": "http://a.test/x", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "[" * 100_000,
        '{"url": "http://a.test/x", "meta": ' + '{"a":' * 40 + "1" + "}" * 41,
        b'{"url": "http://a.test/\xff"}',
    ],
)
def test_malformed_requests_are_value_errors(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        CrawlRequest.from_json(text)


def test_bounds_are_accepted_and_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"url": URL, "priority": -PRIORITY_LIMIT, "depth": MAX_DEPTH})
    req = CrawlRequest.from_json(text)
    assert (req.priority, req.depth) == (-PRIORITY_LIMIT, MAX_DEPTH)
    nested: object = 1
    for _ in range(MAX_JSON_NESTING - 2):  # with the request and meta objects: the limit
        nested = {"a": nested}
    meta = {"deep": nested, "text": "[{" * 1000}
    assert CrawlRequest.from_json(json.dumps({"url": URL, "meta": meta})).meta == meta


def test_constructor_clamps_priority_and_checks_types() -> None:
    assert CrawlRequest(URL, priority=10**9).priority == PRIORITY_LIMIT
    assert CrawlRequest(URL, priority=-(10**9)).priority == -PRIORITY_LIMIT
    for bad in ({"priority": 1.5}, {"depth": float("inf")}, {"depth": MAX_DEPTH + 1}):
        with pytest.raises(ValueError):
            CrawlRequest(URL, **bad)


def test_inbox_filter_checks_method_and_scope_unless_the_job_allows() -> None:
    from crawlq.engine.inbox import inbox_filter
    from crawlq.rules.scope import Scope
    from crawlq.settings import Settings
    from crawlq.urls import UrlRules

    scope = Scope(("a.test",), max_depth=2, url_rules=UrlRules(("sid",)))
    strict = inbox_filter(Settings(), scope)
    head = CrawlRequest("http://a.test/x", method="HEAD")
    assert strict(head) is head
    assert strict(CrawlRequest("http://a.test/x", method="POST")).startswith(  # type: ignore[union-attr]
        "method_not_allowed: POST"
    )
    assert strict(CrawlRequest("http://b.test/x")) == "out_of_scope: offsite"
    assert strict(CrawlRequest("http://a.test/x", depth=3)) == "out_of_scope: max_depth"
    stripped = strict(CrawlRequest("http://a.test/x?sid=42&k=1"))
    assert isinstance(stripped, CrawlRequest) and stripped.url == "http://a.test/x?k=1"
    loose = inbox_filter(Settings(inbox_methods=("get", "post"), inbox_bypass_scope=True), scope)
    post = CrawlRequest("http://b.test/x", method="POST")
    assert loose(post) is post
    assert loose(CrawlRequest("http://b.test/x", method="HEAD")) is not None


def test_inbox_filter_rejects_callbacks_the_spider_does_not_have() -> None:
    from crawlq.engine.inbox import inbox_filter
    from crawlq.rules.scope import Scope
    from crawlq.settings import Settings
    from crawlq.sitemap import SITEMAP_CALLBACK
    from crawlq.spider import Spider

    class Shop(Spider):
        def parse_item(self, response: object) -> None:
            return None

        def _helper(self) -> None:
            return None

    check = inbox_filter(Settings(), Scope(("a.test",)), Shop())
    for callback in ("parse", "parse_item", SITEMAP_CALLBACK, None):
        request = CrawlRequest("http://a.test/x", callback=callback)
        assert check(request) == request, callback
    for callback in ("nosuch", "_helper", "__init__", "start_requests"):
        verdict = check(CrawlRequest("http://a.test/x", callback=callback))
        assert verdict == (
            f"unknown_callback: {callback!r} is not a callback of the worker's spider Shop"
        )
    # without a spider (a frontier opened by a producer), callbacks are the workers' business
    assert isinstance(
        inbox_filter(Settings(), Scope(("a.test",)))(CrawlRequest("http://a.test/x", callback="x")),
        CrawlRequest,
    )


def test_a_referrer_travels_with_the_request_and_is_not_part_of_its_identity() -> None:
    linked = CrawlRequest(URL, referrer="http://a.test/index.html")
    back = CrawlRequest.from_json(linked.to_json())
    assert back.referrer == "http://a.test/index.html"
    assert json.loads(linked.to_json())["referrer"] == "http://a.test/index.html"
    assert "referrer" not in json.loads(CrawlRequest(URL).to_json())  # a seed has none
    assert back == CrawlRequest(URL) and back.fingerprint == CrawlRequest(URL).fingerprint


def test_an_untrusted_referrer_is_normalised_or_refused() -> None:
    # credentials and fragments never reach the store; control characters are encoded
    entry = json.dumps({"url": URL, "referrer": "HTTP://user:secret@A.test/p a\x1b[31m#frag"})
    referrer = CrawlRequest.from_json(entry).referrer
    assert referrer is not None
    assert "secret" not in referrer and "user" not in referrer and "#" not in referrer
    assert "\x1b" not in referrer and " " not in referrer
    for bad in (5, ["http://a.test/"], "javascript:alert(1)", "http://a.test/" + "x" * 2100):
        with pytest.raises(ValueError):
            CrawlRequest.from_json(json.dumps({"url": URL, "referrer": bad}))
    with pytest.raises(ValueError, match="referrer"):
        CrawlRequest(URL, referrer=b"http://a.test/")  # type: ignore[arg-type]


def test_the_referrer_bound_is_the_url_length_limit() -> None:
    from crawlq.request import MAX_REFERRER_CHARS
    from crawlq.request.crawl_request import MAX_URL_LENGTH

    assert MAX_REFERRER_CHARS == MAX_URL_LENGTH  # one limit, spelt twice to avoid a cycle
    at_limit = "http://a.test/" + "r" * (MAX_URL_LENGTH - len("http://a.test/"))
    referrer = CrawlRequest.from_json(json.dumps({"url": URL, "referrer": at_limit})).referrer
    assert referrer == at_limit
    with pytest.raises(ValueError, match="referrer longer than"):
        CrawlRequest.from_json(json.dumps({"url": URL, "referrer": at_limit + "r"}))


def test_an_unknown_key_is_refused_and_named_not_dropped() -> None:
    """User trial: ``{"url": …, "priorty": 5}`` was queued at priority 0, the key ignored."""
    with pytest.raises(ValueError, match=r"unknown key 'priorty' \(did you mean 'priority'\?\)"):
        CrawlRequest.from_json(json.dumps({"url": URL, "priorty": 5}))
    with pytest.raises(ValueError, match="unknown key 'a' and 1 more"):
        CrawlRequest.from_json(json.dumps({"url": URL, "b": 1, "a": 2}))


def test_every_key_a_request_writes_is_read_back() -> None:
    from crawlq.request.crawl_request import JSON_KEYS

    full = CrawlRequest(
        URL,
        method="POST",
        body=b"x=1",
        priority=3,
        depth=2,
        callback="parse_item",
        cb_kwargs={"k": 1},
        meta={"m": 1},
        cookies={"c": "v"},
        revisit=True,
        referrer="http://a.test/",
        headers={"X-A": "1"},
        errback="on_error",
        dont_filter=True,
        visit="v1",
    )
    assert set(json.loads(full.to_json())) == JSON_KEYS
    assert CrawlRequest.from_json(full.to_json()) == full
