"""Fault endpoints answered by status and headers: errors, pushback, redirects, robots, cookies.

``/page``, ``/status``, ``/flaky``, ``/retry-after``, ``/retry-after-date``, ``/busy``,
``/redirect``, ``/redirect-to``, ``/redirect-loop``, ``/self-redirect``, ``/query-order``,
``/switch``, ``/robots.txt``,
``/robots-body``, ``/cookie-wall`` and ``/set-cookie``: each is described in the endpoint
table of `crawlq.testing.server`.
"""

from __future__ import annotations

import time
from email.utils import formatdate
from html import escape
from urllib.parse import urlencode

from aiohttp import web
from multidict import CIMultiDict

from crawlq.testing.fault_state import FAULT_STATE, bump, html_response

__all__ = ["routes"]


def routes() -> list[web.RouteDef]:
    """The routes of these endpoints, for `crawlq.testing.server.make_fault_app`."""
    return [
        web.get(r"/page/{n:\d+}", _page),
        web.get(r"/status/{code:\d+}", _status),
        web.get(r"/flaky/{key}/{fails:\d+}", _flaky),
        web.get(r"/retry-after/{key}/{seconds:\d+}", _retry_after),
        web.get(r"/retry-after-date/{key}/{seconds:\d+}", _retry_after),
        web.get(r"/busy/{key}/{fails:\d+}", _busy),
        web.get(r"/redirect/{n:\d+}", _redirect_chain),
        web.route("*", "/redirect-to", _redirect_to),
        web.get(r"/redirect-loop/{side:[ab]}", _redirect_loop),
        web.get(r"/self-redirect/{key}", _self_redirect),
        web.get(r"/query-order/{order:asc|desc}", _query_order),
        web.get(r"/switch/{name}", _switch),
        web.get("/robots.txt", _robots),
        web.get("/robots-body", _robots),
        web.get(r"/cookie-wall/{key}", _cookie_wall),
        web.get(r"/set-cookie/{name}/{value}", _set_cookie),
    ]


async def _page(request: web.Request) -> web.StreamResponse:
    n = int(request.match_info["n"])
    links = "".join(f'<a href="/page/{k}">page {k}</a>\n' for k in (n + 1, n + 2))
    return html_response(f"Page {n}", f"<p>This is page {n}.</p>\n{links}")


async def _status(request: web.Request) -> web.StreamResponse:
    code = int(request.match_info["code"])
    if not 200 <= code <= 599:
        raise web.HTTPBadRequest(text="status must be 200-599")
    headers = CIMultiDict[str]()
    for item in request.query.getall("h", []):
        name, _, value = item.partition(":")
        headers.add(name.strip(), value.strip())
    if code in (204, 304):
        return web.Response(status=code, headers=headers)
    return web.Response(status=code, text=f"status {code}\n", headers=headers)


async def _flaky(request: web.Request) -> web.StreamResponse:
    seen = bump(request, "flaky")
    if seen <= int(request.match_info["fails"]):
        return html_response(f"Failure {seen}", status=500)
    return html_response("Recovered")


async def _switch(request: web.Request) -> web.StreamResponse:
    if request.app[FAULT_STATE].switch_down:
        return html_response("Down for now", status=503)
    return html_response(request.match_info["name"])


async def _retry_after(request: web.Request) -> web.StreamResponse:
    if bump(request, "retry-after") > 1:
        return html_response("After the wait")
    seconds = int(request.match_info["seconds"])
    if request.path.startswith("/retry-after-date/"):
        value = formatdate(time.time() + seconds, usegmt=True)
    else:
        value = str(seconds)
    return web.Response(status=429, text="slow down\n", headers={"Retry-After": value})


async def _busy(request: web.Request) -> web.StreamResponse:
    seen = bump(request, "busy")
    if seen > int(request.match_info["fails"]):
        return html_response("Not busy any more")
    headers = {}
    if "retry_after" in request.query:
        headers["Retry-After"] = request.query["retry_after"]
    status = int(request.query.get("status", "503"))
    return web.Response(status=status, text="busy\n", headers=headers)


def _redirect(location: str, status: int = 302) -> web.Response:
    if status not in (301, 302, 303, 307, 308):
        raise web.HTTPBadRequest(text="redirect status must be 301, 302, 303, 307 or 308")
    return web.Response(status=status, headers={"Location": location})


async def _redirect_chain(request: web.Request) -> web.StreamResponse:
    n = int(request.match_info["n"])
    status = int(request.query.get("status", "302"))
    if n == 0:
        return html_response("Redirect target")
    if n == 1 and "to" in request.query:
        return _redirect(request.query["to"], status)
    return _redirect(f"/redirect/{n - 1}?{request.query_string}".rstrip("?"), status)


async def _redirect_to(request: web.Request) -> web.StreamResponse:
    target = request.query.get("url")
    if not target:
        raise web.HTTPBadRequest(text="missing ?url=")
    response = _redirect(target, int(request.query.get("status", "302")))
    for cookie in request.query.getall("set_cookie", []):
        response.headers.add("Set-Cookie", cookie)
    return response


async def _redirect_loop(request: web.Request) -> web.StreamResponse:
    other = "b" if request.match_info["side"] == "a" else "a"
    return _redirect(f"/redirect-loop/{other}")


async def _self_redirect(request: web.Request) -> web.StreamResponse:
    key = request.match_info["key"]
    if "forever" in request.query or bump(request, "self-redirect") == 1:
        return _redirect(f"{request.path_qs}#top")
    return html_response(f"Self {key}", "<p>After one redirect to itself.</p>")


async def _query_order(request: web.Request) -> web.StreamResponse:
    params = list(request.query.items())
    wanted = sorted(params, key=lambda kv: kv[0], reverse=request.match_info["order"] == "desc")
    if params != wanted:
        return _redirect(f"{request.path}?{urlencode(wanted)}")
    return html_response(f"Query {request.query_string}")


async def _robots(request: web.Request) -> web.StreamResponse:
    state = request.app[FAULT_STATE]
    if request.path == "/robots-body":
        return web.Response(text=state.robots_txt, content_type="text/plain")
    return web.Response(
        status=state.robots_status,
        text=state.robots_txt,
        content_type="text/plain",
        headers=state.robots_headers,
    )


async def _cookie_wall(request: web.Request) -> web.StreamResponse:
    key = request.match_info["key"]
    name = f"wall_{key}"
    if request.cookies.get(name) == "passed" and "never" not in request.query:
        return html_response(f"Behind wall {key}", "<p>The content behind the wall.</p>")
    value = "passed"
    if "count" in request.query:
        value = str(bump(request, "cookie-wall"))
    location = request.path_qs
    headers = {"Location": location, "Set-Cookie": f"{name}={value}; Path=/"}
    return web.Response(status=302, headers=headers)


async def _set_cookie(request: web.Request) -> web.StreamResponse:
    name, value = request.match_info["name"], request.match_info["value"]
    cookie = f"{name}={value}; Path=/"
    if "attrs" in request.query:
        cookie += "; " + request.query["attrs"]
    links = "".join(
        f'<a href="{escape(url, quote=True)}">{escape(url)}</a>\n'
        for url in request.query.getall("link", [])
    )
    response = html_response(f"Cookie {name}", links)
    response.headers["Set-Cookie"] = cookie
    return response
