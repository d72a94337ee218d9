"""`FormRequest.from_response` logs into a loopback site and scrapes the page behind it.

The site checks what a real login form does: a session cookie set by the login page, the
CSRF token of its hidden field, the credentials, and the form's other fields (a checked
checkbox, a select, a textarea, the submit button); its own log of the POST bodies and the
cookies it saw is the evidence.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawlq.spider import FormRequest, Response, Spider

from .conftest import crawl

LOGIN_PAGE = """<html><head><title>Log in</title></head><body>
<form id="search" action="/search" method="get"><input name="q"></form>
<form id="login" action="/session" method="post">
  <input type="hidden" name="csrf" value="{csrf}">
  <input name="user"><input type="password" name="password">
  <input type="checkbox" name="remember" value="yes" checked>
  <input type="checkbox" name="spam" value="yes">
  <select name="lang"><option value="en">English</option>
    <option value="fr" selected>Fr</option></select>
  <textarea name="note">hello there</textarea>
  <input type="submit" name="go" value="Log in"><input type="submit" name="other" value="No">
</form></body></html>"""


@dataclass
class Site:
    """The login site's sessions and what it received."""

    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    posts: list[dict[str, str]] = field(default_factory=list)
    account_cookies: list[str | None] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/robots.txt", self.robots)
        app.router.add_get("/login", self.login_page)
        app.router.add_post("/session", self.login)
        app.router.add_get("/account", self.account)
        return app

    async def robots(self, request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nAllow: /\n")

    async def login_page(self, request: web.Request) -> web.Response:
        sid, csrf = secrets.token_hex(8), secrets.token_hex(8)
        self.sessions[sid] = {"csrf": csrf, "user": None}
        page = web.Response(text=LOGIN_PAGE.format(csrf=csrf), content_type="text/html")
        page.set_cookie("sid", sid, path="/")
        return page

    async def login(self, request: web.Request) -> web.Response:
        body = dict(parse_qsl((await request.read()).decode()))
        self.posts.append({**body, "_content_type": request.headers.get("Content-Type", "")})
        session = self.sessions.get(request.cookies.get("sid", ""))
        if session is None or body.get("csrf") != session["csrf"]:
            return web.Response(status=403, text="bad csrf")
        if (body.get("user"), body.get("password")) != ("alice", "s3cret"):
            return web.Response(status=403, text="bad credentials")
        session["user"] = "alice"
        raise web.HTTPSeeOther("/account")

    async def account(self, request: web.Request) -> web.Response:
        self.account_cookies.append(request.cookies.get("sid"))
        session = self.sessions.get(request.cookies.get("sid", ""))
        if session is None or session["user"] is None:
            return web.Response(status=403, text="log in first")
        html = f"<title>Account of {session['user']}</title><p class='balance'>42</p>"
        return web.Response(text=html, content_type="text/html")


class LoginSpider(Spider):
    def parse(self, response: Response) -> Any:
        if response.url.endswith("/login"):
            yield FormRequest.from_response(
                response,
                formid="login",
                formdata={"user": "alice", "password": "s3cret"},
                callback="account",
            )

    def account(self, response: Response) -> Any:
        yield {"title": response.title, "balance": response.css(".balance::text").get()}


@pytest.fixture
async def site() -> AsyncIterator[tuple[Site, str]]:
    state = Site()
    async with TestServer(state.app(), host="127.0.0.1") as server:
        yield state, str(server.make_url("")).rstrip("/")


async def _login(db: Path, site: tuple[Site, str], **settings: Any) -> None:
    state, base = site
    r = await crawl(db, [f"{base}/login"], LoginSpider, **settings)
    assert [i.data for i in r.items] == [{"title": "Account of alice", "balance": "42"}]
    assert len(state.posts) == 1
    post = state.posts[0]
    assert post.pop("_content_type") == "application/x-www-form-urlencoded"
    (sid,) = state.sessions
    assert post == {
        "csrf": state.sessions[sid]["csrf"],
        "user": "alice",
        "password": "s3cret",
        "remember": "yes",
        "lang": "fr",
        "note": "hello there",
        "go": "Log in",
    }
    assert state.account_cookies == [sid]  # the session cookie of the login page
    assert r.pages[f"{base}/account"].status == 200


async def test_from_response_logs_in_and_scrapes_the_page_behind(
    db: Path, site: tuple[Site, str]
) -> None:
    await _login(db, site)


async def test_from_response_logs_in_through_a_redis_job(
    db: Path, site: tuple[Site, str], redis_url: str, job: str
) -> None:
    await _login(db, site, frontier=redis_url, job=job)
