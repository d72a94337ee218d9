from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from crawlq.errors import CrawlqError, InvalidURL
from crawlq.links import parse_html
from crawlq.request import CrawlRequest, FetchResult
from crawlq.spider import Response, Spider, SpiderError, run_callback

URL = "http://example.com/docs/index.html"

HTML = """<html><head><title> Docs   Index </title></head><body>
<h1 class="t">Welcome</h1>
<a id="a1" href="intro.html">Intro</a>
<a id="a2" href="/guide/start.html#top">Start</a>
<a id="nohref" name="x">anchor</a>
<a href="mailto:x@example.com">mail</a>
<a href="logo.png">logo</a>
<a href="intro.html#again">Intro again</a>
</body></html>"""


def make_response(
    body: str = HTML,
    *,
    url: str = URL,
    final_url: str | None = None,
    status: int = 200,
    request: CrawlRequest | None = None,
    content_type: str = "text/html; charset=utf-8",
) -> Response:
    req = request or CrawlRequest(url=url)
    result = FetchResult(
        url=req.url,
        final_url=final_url or req.url,
        status=status,
        headers={"content-type": content_type, "x-test": "1"},
        body=body.encode(),
        encoding="utf-8",
        text=body,
        elapsed_s=0.01,
    )
    return Response(req, result)


# --- Response -------------------------------------------------------------------------


def test_response_attributes() -> None:
    req = CrawlRequest(url=URL, depth=3, meta={"k": "v"})
    resp = make_response(request=req, final_url="http://example.com/docs/moved.html", status=203)
    assert resp.url == "http://example.com/docs/moved.html"
    assert resp.request is req
    assert resp.status == 203
    assert resp.headers["x-test"] == "1"
    assert resp.body == HTML.encode()
    assert resp.text == HTML
    assert resp.encoding == "utf-8"
    assert resp.meta == {"k": "v"}
    assert resp.depth == 3
    assert resp.title == "Docs Index"
    assert "203" in repr(resp)


def test_css_and_xpath_use_a_lazy_parsel_selector() -> None:
    resp = make_response()
    assert resp._selector is None
    assert resp.css("h1.t::text").get() == "Welcome"
    assert resp.xpath("//a[@id=$id]/@href", id="a1").get() == "intro.html"
    assert resp.selector is resp.selector


def test_xhtml_with_xml_declaration_is_parsed_as_html() -> None:
    body = '<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>X</title></head></html>'
    assert make_response(body).css("title::text").get() == "X"


def test_xml_media_types_are_parsed_as_xml() -> None:
    body = '<?xml version="1.0"?><urlset><url><loc>http://example.com/a</loc></url></urlset>'
    resp = make_response(body, content_type="application/xml")
    assert resp.xpath("//loc/text()").getall() == ["http://example.com/a"]


def test_tree_is_lazy_and_shared() -> None:
    resp = make_response()
    assert resp._tree is None
    assert resp.tree is resp.tree
    tree = parse_html(HTML)
    shared = Response(resp.request, resp._result, tree=tree)
    assert shared.tree is tree


def test_links_use_the_final_url() -> None:
    resp = make_response(final_url="http://example.com/other/index.html")
    assert resp.links() == [
        "http://example.com/other/intro.html",
        "http://example.com/guide/start.html",
    ]
    first = resp.links()
    first.clear()
    assert len(resp.links()) == 2  # a fresh list every call


def test_urljoin_honours_base_href() -> None:
    resp = make_response('<base href="http://cdn.example.com/x/"><a href="a.html">a</a>')
    assert resp.urljoin(" b.html ") == "http://cdn.example.com/x/b.html"
    assert make_response().urljoin("b.html") == "http://example.com/docs/b.html"


def test_follow_depth_and_default_priority() -> None:
    resp = make_response(request=CrawlRequest(url=URL, depth=2))
    req = resp.follow("intro.html#frag")
    assert req is not None
    assert req.url == "http://example.com/docs/intro.html"
    assert req.depth == 3
    assert req.priority == -3
    assert req.callback is None
    assert req.method == "GET"
    followed = make_response().follow("a.html")
    assert followed is not None and followed.priority == -1


def test_follow_explicit_priority_meta_cb_kwargs_method_body() -> None:
    meta = {"from": "index"}
    req = make_response().follow(
        "/search", priority=7, meta=meta, cb_kwargs={"n": 1}, method="post", body=b"q=1"
    )
    assert req is not None
    assert (req.priority, req.method, req.body) == (7, "POST", b"q=1")
    assert req.meta == {"from": "index"}
    assert req.meta is not meta
    assert req.cb_kwargs == {"n": 1}


class NamedSpider(Spider):
    name = "named"

    def parse_item(self, response: Response) -> None:
        return None


def test_follow_stores_callback_by_name_and_serialises() -> None:
    spider = NamedSpider()
    resp = make_response()
    by_method = resp.follow("a.html", callback=spider.parse_item)
    by_name = resp.follow("a.html", callback="parse_item")
    assert by_method is not None and by_name is not None
    assert by_method.callback == by_name.callback == "parse_item"
    assert CrawlRequest.from_json(by_method.to_json()) == by_method
    assert json.loads(by_method.to_json())["callback"] == "parse_item"


@pytest.mark.parametrize("bad", [lambda r: None, print, NamedSpider.parse_item])
def test_follow_rejects_callbacks_that_are_not_spider_methods(bad: Any) -> None:
    with pytest.raises(TypeError, match="spider method"):
        make_response().follow("a.html", callback=bad)


def test_follow_with_element_and_attribute_selectors() -> None:
    resp = make_response()
    by_element, by_attribute = (
        resp.follow(resp.css("a#a1")[0]),
        resp.follow(resp.css("a#a2::attr(href)")[0]),
    )
    assert by_element is not None and by_element.url == "http://example.com/docs/intro.html"
    assert by_attribute is not None and by_attribute.url == "http://example.com/guide/start.html"
    with pytest.raises(ValueError, match="no href"):
        resp.follow(resp.css("a#nohref")[0])


@pytest.mark.parametrize(
    "href", ["javascript:void(0)", "mailto:a@b.example", "ftp://x.example/f", "http://"]
)
def test_follow_of_a_link_that_cannot_be_crawled_is_none(href: str) -> None:
    assert make_response().follow(href) is None


def test_follow_all_defaults_to_every_link() -> None:
    reqs = make_response().follow_all()
    assert [r.url for r in reqs] == [
        "http://example.com/docs/intro.html",
        "http://example.com/guide/start.html",
    ]
    assert all(r.depth == 1 and r.priority == -1 for r in reqs)


def test_follow_all_with_selectors_skips_invalid_ones() -> None:
    resp = make_response()
    reqs = resp.follow_all(resp.css("a"), callback="parse_item", meta={"m": 1})
    # a#nohref has no href and mailto: is not http: both skipped; the logo is followed when asked.
    assert [r.url.rsplit("/", 1)[1] for r in reqs] == [
        "intro.html",
        "start.html",
        "logo.png",
        "intro.html",
    ]
    assert {r.callback for r in reqs} == {"parse_item"}
    assert reqs[0].meta == {"m": 1}
    assert reqs[0].meta is not reqs[1].meta
    assert resp.follow_all(["http://", "ok.html", "tel:1"]) == [resp.follow("ok.html")]


def test_follow_all_rejects_bad_callback_even_without_links() -> None:
    with pytest.raises(TypeError):
        make_response("<p>no links</p>").follow_all(callback=print)


# --- Spider ---------------------------------------------------------------------------


def test_spider_defaults() -> None:
    spider = Spider()
    assert spider.name == "default"
    assert spider.start_urls == [] and spider.allowed_domains == [] and spider.custom_settings == {}
    assert list(spider.start_requests()) == []


def test_start_requests_from_start_urls_set_by_keyword() -> None:
    spider = Spider(start_urls=["http://a.example/", "https://b.example/x#f"])
    reqs = list(spider.start_requests())
    assert [r.url for r in reqs] == ["http://a.example/", "https://b.example/x"]
    assert all(r.depth == 0 and r.priority == 0 and r.callback is None for r in reqs)
    assert Spider.start_urls == []  # the class attribute is untouched


def test_start_requests_reject_invalid_seed() -> None:
    with pytest.raises(InvalidURL):
        list(Spider(start_urls=["notaurl"]).start_requests())


def test_wants_status() -> None:
    class Handles404(Spider):
        handle_httpstatus_list = [404]

    assert Spider().wants_status(200) and Spider().wants_status(299)
    assert not Spider().wants_status(404)
    assert not Spider().wants_status(301)
    assert not Spider().wants_status(500)
    assert Handles404().wants_status(404)
    assert not Handles404().wants_status(410)


async def test_default_parse_follows_every_link() -> None:
    items, reqs = await run_callback(Spider(), make_response())
    assert items == []
    assert [r.url for r in reqs] == [
        "http://example.com/docs/intro.html",
        "http://example.com/guide/start.html",
    ]


# --- run_callback ---------------------------------------------------------------------


class ShapesSpider(Spider):
    name = "shapes"

    def gen(self, response: Response) -> Iterator[Any]:
        yield {"n": 1}
        yield response.follow("a.html")
        yield None
        yield {"n": 2}

    def as_list(self, response: Response) -> list[Any]:
        return [{"n": 1}, response.follow("a.html")]

    def single_item(self, response: Response) -> dict[str, Any]:
        return {"only": True}

    def single_request(self, response: Response) -> CrawlRequest | None:
        return response.follow("a.html")

    def nothing(self, response: Response) -> None:
        return None

    async def coro(self, response: Response) -> list[Any]:
        return [{"n": 1}, response.follow("a.html")]

    async def coro_item(self, response: Response) -> dict[str, Any]:
        return {"n": 1}

    async def agen(self, response: Response) -> AsyncIterator[Any]:
        yield {"n": 1}
        yield response.follow("a.html")

    def with_kwargs(self, response: Response, page: int, tag: str = "") -> dict[str, Any]:
        return {"page": page, "tag": tag}

    def bad_yield(self, response: Response) -> Iterator[Any]:
        yield {"n": 1}
        yield "not an item"

    def bad_return(self, response: Response) -> int:
        return 42

    def returns_str(self, response: Response) -> str:
        return "abc"

    def raises(self, response: Response) -> None:
        raise KeyError("missing")

    not_callable = "x"


def call(callback: str, **cb_kwargs: Any) -> tuple[list[dict[str, Any]], list[CrawlRequest]]:
    import asyncio

    req = CrawlRequest(url=URL, callback=callback, cb_kwargs=cb_kwargs)
    return asyncio.run(run_callback(ShapesSpider(), make_response(request=req)))


A_HTML = "http://example.com/docs/a.html"


@pytest.mark.parametrize("callback", ["gen", "as_list", "coro", "agen"])
def test_run_callback_collects_items_and_requests(callback: str) -> None:
    items, reqs = call(callback)
    assert items[0] == {"n": 1}
    assert [r.url for r in reqs] == [A_HTML]
    assert reqs[0].depth == 1


def test_run_callback_generator_keeps_order_and_skips_none() -> None:
    items, _ = call("gen")
    assert items == [{"n": 1}, {"n": 2}]


@pytest.mark.parametrize(
    ("callback", "expected_items", "expected_urls"),
    [
        ("single_item", [{"only": True}], []),
        ("single_request", [], [A_HTML]),
        ("nothing", [], []),
        ("coro_item", [{"n": 1}], []),
    ],
)
def test_run_callback_single_values(callback: str, expected_items: Any, expected_urls: Any) -> None:
    items, reqs = call(callback)
    assert items == expected_items
    assert [r.url for r in reqs] == expected_urls


def test_run_callback_passes_cb_kwargs() -> None:
    assert call("with_kwargs", page=2, tag="t")[0] == [{"page": 2, "tag": "t"}]


@pytest.mark.parametrize("callback", ["bad_yield", "bad_return", "returns_str"])
def test_run_callback_bad_output_type_is_spider_error(callback: str) -> None:
    with pytest.raises(SpiderError) as info:
        call(callback)
    err = info.value
    assert isinstance(err, CrawlqError)
    assert err.url == URL and err.callback == callback
    assert isinstance(err.__cause__, TypeError)
    assert callback in str(err) and URL in str(err)


def test_run_callback_wraps_callback_exceptions() -> None:
    with pytest.raises(SpiderError, match="KeyError") as info:
        call("raises")
    assert isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize("callback", ["no_such_method", "not_callable"])
def test_run_callback_missing_callback(callback: str) -> None:
    with pytest.raises(SpiderError, match=callback) as info:
        call(callback)
    assert info.value.callback == callback


def test_run_callback_bad_cb_kwargs_is_spider_error() -> None:
    with pytest.raises(SpiderError, match="TypeError"):
        call("with_kwargs", nope=1)


# --- load_spider ----------------------------------------------------------------------


def test_response_json_parses_the_body_as_scrapy_does() -> None:
    resp = make_response('{"a": [1, 2], "b": "é"}', content_type="application/json")
    assert resp.json() == {"a": [1, 2], "b": "é"}
    with pytest.raises(ValueError, match="Expecting value"):
        make_response("<html>not json</html>").json()
