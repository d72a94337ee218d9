"""Request headers, errback and dont_filter as values: the header rules, the Referer policy,
the wire form read as untrusted text, fingerprints, and follow()."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crawlq.engine.parse import ParsedPage
from crawlq.request import CrawlRequest
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.spider import Spider
from crawlq.web.headers import MAX_HEADER_BYTES, MAX_HEADERS, check_headers, referer
from tests.unit.test_spider import make_response

URL = "http://a.test/x"


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"Bad Name": "v"}, "header name 'Bad Name' is not an RFC 9110 token"),
        ({"": "v"}, "header name '' is not an RFC 9110 token"),
        ({"X-A": "a\r\nInjected: 1"}, "the value of header X-A holds a character"),
        ({"X-A": "a\nb"}, "the value of header X-A holds a character"),
        ({"X-A": "a\x00b"}, "the value of header X-A holds a character"),
        ({"X-A": "caf\u20ac"}, "the value of header X-A holds a character"),  # not Latin-1
        ({"X-A": 1}, "the value of header X-A must be a string"),
        ({"host": "h"}, "header host may not be set"),
        ({"COOKIE": "a=1"}, "header COOKIE may not be set: cookies come from the worker's jar"),
        ({"Authorization": "Basic eA=="}, "header Authorization may not be set: credentials"),
        ({"Proxy-Authorization": "x"}, "header Proxy-Authorization may not be set"),
        ({"X-A": "1", "x-a": "2"}, "header x-a is given twice"),
        ({"X-A": "a" * MAX_HEADER_BYTES}, f"longer than {MAX_HEADER_BYTES} characters"),
        ({f"X-{n}": "v" for n in range(MAX_HEADERS + 1)}, f"more than {MAX_HEADERS} headers"),
    ],
)
def test_bad_headers_are_refused_naming_the_header(headers: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=r"^headers: ") as info:
        CrawlRequest(URL, headers=headers)
    assert says in str(info.value)
    assert "eA==" not in str(info.value)


def test_headers_are_checked_trimmed_and_read_only() -> None:
    req = CrawlRequest(URL, headers={"X-A": "  spaced\t", "Accept-Language": "fr, en;q=0.5"})
    assert dict(req.headers) == {"X-A": "spaced", "Accept-Language": "fr, en;q=0.5"}
    with pytest.raises(TypeError):
        req.headers["X-B"] = "no"  # type: ignore[index]
    assert dict(check_headers([("X-Latin", "caf\xe9")])) == {"X-Latin": "caf\xe9"}  # obs-text


def test_headers_do_not_change_the_fingerprint_or_equality() -> None:
    plain = CrawlRequest(URL)
    with_headers = CrawlRequest(URL, headers={"X-A": "1"})
    assert with_headers.fingerprint == plain.fingerprint == with_headers.record_fingerprint
    assert with_headers == plain


def test_the_wire_form_keeps_headers_errback_and_dont_filter() -> None:
    req = CrawlRequest(URL, headers={"X-A": "1"}, errback="failed", dont_filter=True)
    back = CrawlRequest.from_json(req.to_json())
    assert (dict(back.headers), back.errback, back.dont_filter) == ({"X-A": "1"}, "failed", True)
    assert back.visit == req.visit and back.fingerprint == req.fingerprint
    assert json.loads(CrawlRequest(URL).to_json()) == {"url": URL}  # defaults stay out


@pytest.mark.parametrize(
    "extra",
    [
        {"headers": ["X-A: 1"]},
        {"headers": {"X-A": 1}},
        {"headers": {"X-A": "a\r\nB: c"}},
        {"headers": {"Host": "evil.test"}},
        {"headers": {"Cookie": "sid=1"}},
        {"headers": {f"X-{n}": "v" for n in range(MAX_HEADERS + 1)}},
        {"errback": 1},
        {"dont_filter": "yes"},
        {"dont_filter": True, "visit": 5},
        {"dont_filter": True, "visit": "v" * 101},
    ],
)
def test_untrusted_wire_headers_and_flags_are_refused(extra: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        CrawlRequest.from_json(json.dumps({"url": URL, **extra}))


def test_dont_filter_gives_a_fingerprint_of_its_own_per_visit() -> None:
    plain = CrawlRequest(URL)
    a, b = CrawlRequest(URL, dont_filter=True), CrawlRequest(URL, dont_filter=True)
    assert len({plain.fingerprint, a.fingerprint, b.fingerprint}) == 3  # random visits
    assert a.record_fingerprint == a.fingerprint != plain.fingerprint  # a record per visit
    keyed = CrawlRequest(URL, dont_filter=True, visit="k")
    assert keyed.fingerprint == CrawlRequest(URL, dont_filter=True, visit="k").fingerprint
    assert CrawlRequest(URL, visit="ignored").visit == ""  # only with dont_filter


class Spy(Spider):
    def parse(self, response: Any) -> Any:
        return None

    def failed(self, failure: Any) -> None:
        return None


def test_a_page_parsed_again_yields_the_same_dont_filter_fingerprints() -> None:
    parent = CrawlRequest("http://a.test/p")
    yielded = [CrawlRequest(URL, dont_filter=True), CrawlRequest(URL, dont_filter=True)]
    fingerprints = []
    for _ in range(2):  # a re-delivered lease: the callback runs again, new random visits
        fresh = [CrawlRequest(r.url, dont_filter=True) for r in yielded]
        page = ParsedPage(None)
        page.take([], fresh, parent, Spy(), Scope(("a.test",)), Settings())
        fingerprints.append([link.fingerprint for link in page.links])
    assert fingerprints[0] == fingerprints[1]  # so the frontier queues them once
    assert len(set(fingerprints[0])) == 2  # one per yield


def test_follow_and_follow_all_carry_headers_errback_and_dont_filter() -> None:
    spider = Spy()
    response = make_response('<a href="/a">a</a><a href="/b">b</a>')
    req = response.follow("/a", headers={"X-A": "1"}, errback=spider.failed, dont_filter=True)
    assert req is not None
    assert (dict(req.headers), req.errback, req.dont_filter) == ({"X-A": "1"}, "failed", True)
    assert req.referrer == response.url
    links = response.follow_all(headers={"X-B": "2"}, errback="failed")
    assert [dict(r.headers) for r in links] == [{"X-B": "2"}] * 2
    assert [r.errback for r in links] == ["failed"] * 2
    with pytest.raises(ValueError, match="headers: header Host may not be set"):
        response.follow_all([], headers={"Host": "x"})
    with pytest.raises(TypeError):
        response.follow("/a", errback=print)


@pytest.mark.parametrize(
    ("policy", "source", "target", "sent"),
    [
        (
            "strict-origin-when-cross-origin",
            "http://a.test/p?q=1",
            "http://a.test/x",
            "http://a.test/p?q=1",
        ),
        ("strict-origin-when-cross-origin", "http://a.test/p", "http://b.test/x", "http://a.test/"),
        ("strict-origin-when-cross-origin", "https://a.test/p", "http://a.test/x", None),
        (
            "strict-origin-when-cross-origin",
            "http://a.test:8080/p",
            "http://a.test/x",
            "http://a.test:8080/",
        ),
        ("no-referrer", "http://a.test/p", "http://a.test/x", None),
        ("no-referrer-when-downgrade", "http://a.test/p", "http://b.test/x", "http://a.test/p"),
        ("no-referrer-when-downgrade", "https://a.test/p", "http://a.test/x", None),
        ("same-origin", "http://a.test/p", "http://a.test/x", "http://a.test/p"),
        ("same-origin", "http://a.test/p", "https://a.test/x", None),
        ("origin", "https://a.test/p", "http://b.test/x", "https://a.test/"),
        ("strict-origin", "https://a.test/p", "https://b.test/x", "https://a.test/"),
        ("strict-origin", "https://a.test/p", "http://b.test/x", None),
        ("origin-when-cross-origin", "https://a.test/p", "http://a.test/x", "https://a.test/"),
        ("unsafe-url", "https://a.test/p?q", "http://b.test/x", "https://a.test/p?q"),
        ("unsafe-url", "http://u:pw@a.test/p#f", "http://a.test/x", "http://a.test/p"),
    ],
)
def test_referer_follows_the_w3c_referrer_policy(
    policy: str, source: str, target: str, sent: str | None
) -> None:
    assert referer(source, target, policy) == sent


def test_a_seed_sends_no_referer() -> None:
    assert referer(None, URL, "unsafe-url") is None


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (["no colon"], "is not 'Name: value' (no colon)"),
        (["User-Agent: x"], "set user_agent (--user-agent) instead"),
        (["X-A: 1", "x-a: 2"], "header x-a is given twice"),
        (["Transfer-Encoding: chunked"], "header Transfer-Encoding may not be set"),
    ],
)
def test_bad_default_headers_name_the_setting_and_the_header(given: list[str], says: str) -> None:
    with pytest.raises(Exception, match="default_headers") as info:
        Settings.build(cli={"default_headers": given}, env={})
    assert says in str(info.value)


def test_default_headers_from_a_variable_are_one_per_line() -> None:
    env = {"CRAWLQ_DEFAULT_HEADERS": "Accept: a/b, c/d\nX-A:  1 \n\n"}
    assert Settings.build(env=env).default_headers == ("Accept: a/b, c/d", "X-A: 1")


def test_the_inbox_refuses_an_errback_the_spider_does_not_have() -> None:
    from crawlq.engine.inbox import inbox_filter

    check = inbox_filter(Settings(), Scope(("a.test",)), Spy())
    good = CrawlRequest(URL, errback="failed")
    assert check(good) == good
    for name in ("_private", "start_requests", "nosuch", "__init__"):
        verdict = check(CrawlRequest(URL, errback=name))
        assert verdict == f"unknown_errback: {name!r} is not a callback of the worker's spider Spy"
