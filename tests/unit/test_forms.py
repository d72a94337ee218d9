"""`CrawlRequest.form` and `FormRequest.from_response` without a network: what they submit."""

from __future__ import annotations

import pytest

from crawlq.request import CrawlRequest, FetchResult
from crawlq.spider import FormRequest, Response


def _page(html: str, url: str = "http://site.test/dir/page") -> Response:
    result = FetchResult(
        url, url, 200, {"content-type": "text/html"}, html.encode(), "utf-8", html, 0.0
    )
    return Response(CrawlRequest(url), result)


FORM = """<form name="f" action="../go?old=1" method="get">
<input name="a" value="1"><input name="b" value="x" disabled>
<input type="radio" name="r" value="no"><input type="radio" name="r" value="yes" checked>
<input type="checkbox" name="c">
<input type="checkbox" name="d" checked>
<select name="s"><option>First one</option><option>Second</option></select>
<select name="m" multiple><option value="1" selected>1</option>
<option value="2" selected>2</option></select>
<button name="act" value="save">Save</button><button name="act" value="del">Delete</button>
</form>"""


def test_a_get_form_puts_its_fields_in_the_action_query() -> None:
    req = FormRequest.from_response(_page(FORM), formname="f", formdata={"a": "changed"})
    assert req.method == "GET"
    assert req.body == b""
    assert req.url == "http://site.test/go?r=yes&d=on&s=First+one&m=1&m=2&act=save&a=changed"


def test_clickdata_picks_the_button_and_none_removes_a_field() -> None:
    req = FormRequest.from_response(
        _page(FORM), formdata={"a": None}, clickdata={"value": "del"}, method="post"
    )
    assert req.method == "POST"
    assert req.body == b"r=yes&d=on&s=First+one&m=1&m=2&act=del"
    assert req.headers["Content-Type"] == "application/x-www-form-urlencoded"
    nothing_clicked = FormRequest.from_response(_page(FORM), formdata={"a": None}, dont_click=True)
    assert "act=" not in nothing_clicked.url


def test_forms_are_found_by_css_xpath_and_number_or_the_error_says_why() -> None:
    two = "<form action='/one'><input name='x' value='1'></form>" + FORM.replace('name="f" ', "")
    page = _page(two)
    assert FormRequest.from_response(page).url.startswith("http://site.test/one?x=1")
    assert FormRequest.from_response(page, formnumber=1).url.startswith("http://site.test/go?")
    assert FormRequest.from_response(page, formcss="input[name=a]").url.startswith(
        "http://site.test/go?"
    )
    assert FormRequest.from_response(page, formxpath="//input[@name='x']").url.startswith(
        "http://site.test/one?"
    )
    with pytest.raises(ValueError, match="no <form>"):
        FormRequest.from_response(_page("<p>none</p>"))
    with pytest.raises(ValueError, match="no such submit button"):
        FormRequest.from_response(page, formnumber=1, clickdata={"name": "missing"})


def test_post_bodies_are_fingerprinted() -> None:
    one = CrawlRequest.form("http://site.test/login", {"user": "a"})
    two = CrawlRequest.form("http://site.test/login", {"user": "b"})
    assert one.body == b"user=a"
    assert one.fingerprint != two.fingerprint
    same = CrawlRequest.form("http://site.test/login", [("user", "a")])
    assert one.fingerprint == same.fingerprint
    assert CrawlRequest.form("http://site.test/s?q=1", {"q": "a b"}, "GET").url == (
        "http://site.test/s?q=a+b"
    )
