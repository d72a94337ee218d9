"""Cookie rules (`crawlq.web.cookies`), cookies in requests: checks, wire format, fingerprints."""

from __future__ import annotations

import json

import pytest

from crawlq.cli.option_settings import build_settings
from crawlq.engine.inbox import inbox_filter
from crawlq.engine.job import JOB_FIELDS
from crawlq.request import CrawlRequest
from crawlq.rules.scope import Scope
from crawlq.secrecy import loggable_entry
from crawlq.settings import Settings
from crawlq.web.cookies import (
    MAX_COOKIE_BYTES,
    MAX_COOKIE_HEADER_BYTES,
    MAX_COOKIES,
    check_cookies,
    fit_cookies,
    revisit_fingerprint,
)

URL = "http://a.test/x"
SECRET = "s3cr3t-t0ken"


@pytest.mark.parametrize(
    "cookies",
    [
        {"sid": "abc"},
        {"a": "", "b": '"quoted"', "c": "x=y/z+=="},
        {"__Host-id": "1", "Q!#$%&'*+-.^_`|~": "!#$%&'()*+-./:<=>?@[]^_`{|}~"},
        {f"c{i}": "v" for i in range(MAX_COOKIES)},
        {"big": "v" * (MAX_COOKIE_BYTES - 3)},
    ],
)
def test_cookies_servers_may_send_are_accepted(cookies: dict[str, str]) -> None:
    assert dict(check_cookies(cookies)) == cookies


@pytest.mark.parametrize(
    ("cookies", "message"),
    [
        ({"bad name": "v"}, "cookie name 'bad name' is not an RFC 6265 token"),
        ({"a;b": "v"}, "is not an RFC 6265 token"),
        ({"": "v"}, "is not an RFC 6265 token"),
        ({"é": "v"}, "is not an RFC 6265 token"),
        ({"Path": "v"}, "cookie name 'Path' is a Set-Cookie attribute name"),
        ({"expires": "v"}, "attribute name"),
        ({"sid": f"{SECRET} x"}, "the value of cookie 'sid' is not an RFC 6265 cookie-value"),
        ({"sid": f"{SECRET};admin=1"}, "cookie-value"),
        ({"sid": f"{SECRET}\r\nX-Evil: 1"}, "cookie-value"),
        ({"sid": f"{SECRET},x"}, "cookie-value"),
        ({"sid": f'{SECRET}"'}, "cookie-value"),
        ({"sid": f"{SECRET}\\"}, "cookie-value"),
        ({"sid": f"{SECRET}é"}, "cookie-value"),
        ({"sid": 5}, "the value of cookie 'sid' must be a string, got int"),
        ({"sid": None}, "must be a string, got NoneType"),
        ({5: "v"}, "a cookie name must be a string, got int"),
        ({"big": "v" * MAX_COOKIE_BYTES}, "cookie 'big' is 4099 bytes, name and value; at most"),
        ({f"c{i}": "v" for i in range(MAX_COOKIES + 1)}, f"151 cookies, at most {MAX_COOKIES}"),
        (
            {f"c{i}": "v" * 1000 for i in range(9)},
            f"the Cookie header would be 9043 bytes, at most {MAX_COOKIE_HEADER_BYTES}",
        ),
        (["sid", SECRET], "must be an object of name: value, got list"),
        (f"sid={SECRET}", "must be an object of name: value, got str"),
    ],
)
def test_bad_cookies_are_one_clear_error_without_the_value(cookies: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_cookies(cookies)
    text = str(caught.value)
    assert text.startswith("cookies: ")
    assert message in text
    assert SECRET not in text


def test_a_request_checks_its_cookies_and_keeps_them_read_only() -> None:
    req = CrawlRequest(URL, cookies={"sid": SECRET})
    assert dict(req.cookies) == {"sid": SECRET}
    with pytest.raises(TypeError):
        req.cookies["other"] = "x"  # type: ignore[index]
    assert SECRET not in repr(req)
    with pytest.raises(ValueError, match=r"^cookies: the value of cookie 'sid'"):
        CrawlRequest(URL, cookies={"sid": f"{SECRET} x"})
    assert CrawlRequest(URL).cookies == {}


def test_cookies_are_not_in_the_fingerprint_except_for_a_revisit() -> None:
    plain = CrawlRequest(URL)
    with_cookie = CrawlRequest(URL, cookies={"sid": "1"})
    assert with_cookie.fingerprint == plain.fingerprint
    revisit = CrawlRequest(URL, cookies={"sid": "1"}, revisit=True)
    other = CrawlRequest(URL, cookies={"sid": "2"}, revisit=True)
    assert len({plain.fingerprint, revisit.fingerprint, other.fingerprint}) == 3
    assert revisit.record_fingerprint == other.record_fingerprint == plain.fingerprint
    # a revisit with no cookie (``/p`` -> ``/p#top``) is not the request that redirected
    assert CrawlRequest(URL, revisit=True).fingerprint != plain.fingerprint
    assert CrawlRequest(URL, revisit=True).record_fingerprint == plain.fingerprint
    reordered = CrawlRequest(URL, cookies={"b": "2", "a": "1"}, revisit=True)
    assert (
        reordered.fingerprint
        == CrawlRequest(URL, cookies={"a": "1", "b": "2"}, revisit=True).fingerprint
    )
    assert revisit_fingerprint(plain.fingerprint, {"sid": "1"}) == revisit.fingerprint


def test_cookies_and_revisit_cross_the_wire_format() -> None:
    req = CrawlRequest(URL, cookies={"sid": SECRET, "q": '"x"'}, revisit=True)
    data = json.loads(req.to_json())
    assert (data["cookies"], data["revisit"]) == ({"sid": SECRET, "q": '"x"'}, True)
    again = CrawlRequest.from_json(req.to_json())
    assert again == req
    assert again.fingerprint == req.fingerprint
    assert "cookies" not in json.loads(CrawlRequest(URL).to_json())


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"url": URL, "cookies": {"sid": f"{SECRET} x"}}, "cookies: the value of cookie 'sid'"),
        ({"url": URL, "cookies": {"sid": 1}}, "cookies: the value of cookie 'sid' must be"),
        ({"url": URL, "cookies": [SECRET]}, "cookies: must be an object"),
        ({"url": URL, "cookies": SECRET}, "cookies: must be an object"),
        ({"url": URL, "revisit": "yes"}, "revisit must be true or false"),
        ({"cookies": {"sid": SECRET}}, "not a crawl request object with a url string"),
    ],
)
def test_a_json_request_with_bad_cookies_is_refused_without_the_value(
    entry: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        CrawlRequest.from_json(json.dumps(entry))
    assert message in str(caught.value)
    assert SECRET not in str(caught.value)


def test_fit_cookies_keeps_what_a_request_may_carry() -> None:
    kept, dropped = fit_cookies([("a", "1"), ("bad name", "x"), ("b", "has space"), ("a", "2")])
    assert (kept, dropped) == ({"a": "2"}, 2)
    many = [(f"c{i}", "v") for i in range(MAX_COOKIES + 5)]
    kept, dropped = fit_cookies(many)
    assert (len(kept), dropped) == (MAX_COOKIES, 5)
    big = [(f"c{i}", "v" * 2000) for i in range(5)]
    kept, dropped = fit_cookies(big)
    assert (len(kept), dropped) == (4, 1)
    check_cookies(kept)


def test_the_inbox_refuses_a_revisit() -> None:
    check = inbox_filter(Settings(), Scope(("a.test",)))
    assert isinstance(check(CrawlRequest(URL, cookies={"sid": "1"})), CrawlRequest)  # queued
    refusal = check(CrawlRequest(URL, cookies={"sid": "1"}, revisit=True))
    assert isinstance(refusal, str) and refusal.startswith("revisit_not_allowed")


def test_no_cookies_option_and_job_setting() -> None:
    assert Settings().cookies_enabled is True
    assert build_settings({"no_cookies": True}).cookies_enabled is False
    assert build_settings({"no_cookies": False}).cookies_enabled is True
    assert Settings.build(env={"CRAWLQ_COOKIES_ENABLED": "false"}).cookies_enabled is False
    assert "cookies_enabled" in JOB_FIELDS


def test_an_entry_with_cookies_is_logged_by_its_size_only() -> None:
    raw = json.dumps({"url": URL, "cookies": {"sid": SECRET}}).encode()
    assert loggable_entry(raw) == f"<entry of {len(raw)} bytes with cookies, not shown>"
    assert loggable_entry(b'{"url": "http://a.test/", "COOKIE": 1').startswith("<entry of")
    assert loggable_entry(b"http://a.test/") == repr(b"http://a.test/")
