"""Scrapy spellings a porting user reaches for: ``FormRequest(url, formdata=...)`` and
``response.follow_all(css=...)`` / ``follow_all(xpath=...)``."""

from __future__ import annotations

import pytest

from crawlq.request import CrawlRequest
from crawlq.spider import FormRequest
from tests.unit.test_spider import make_response


def test_form_request_by_hand_is_a_post_of_the_formdata() -> None:
    req = FormRequest(
        "http://example.com/login", formdata={"user": "a b", "pw": "x"}, callback="after"
    )
    assert isinstance(req, CrawlRequest)
    assert (req.method, req.body, req.callback) == ("POST", b"user=a+b&pw=x", "after")
    assert req.headers["Content-Type"] == "application/x-www-form-urlencoded"


def test_form_request_get_puts_the_formdata_in_the_query() -> None:
    req = FormRequest("http://example.com/search", formdata={"q": "pg"}, method="GET")
    assert (req.method, req.url, req.body) == ("GET", "http://example.com/search?q=pg", b"")


def test_form_request_without_formdata_is_the_url_as_it_is() -> None:
    req = FormRequest("http://example.com/s?a=1")
    assert (req.method, req.url, req.body) == ("GET", "http://example.com/s?a=1", b"")


def test_follow_all_css_follows_the_elements_hrefs() -> None:
    response = make_response()
    urls = [r.url for r in response.follow_all(css="a#a1, a#a2")]
    assert urls == ["http://example.com/docs/intro.html", "http://example.com/guide/start.html"]
    by_attr = [r.url for r in response.follow_all(css="a#a1::attr(href)", callback="page")]
    assert by_attr == ["http://example.com/docs/intro.html"]


def test_follow_all_xpath_skips_elements_without_href() -> None:
    urls = [r.url for r in make_response().follow_all(xpath="//a[@id='a1' or @id='nohref']")]
    assert urls == ["http://example.com/docs/intro.html"]


def test_follow_all_takes_one_source_of_links() -> None:
    with pytest.raises(ValueError, match="one of hrefs, css and xpath"):
        make_response().follow_all(["intro.html"], css="a")
