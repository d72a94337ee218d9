"""`Fetcher` credentials: each hop's host decides, exact host, redacted in the exchange."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from aiohttp import web

from crawlq.errors import ConfigError
from crawlq.fetch import Fetcher
from crawlq.fetch.auth import HostCredentials
from crawlq.settings import Settings
from crawlq.testing import RequestLog, ServerThread
from crawlq.web.addresses import AddressGuard

OPEN = AddressGuard(allow_private=True)
BASIC = "Basic " + base64.b64encode(b"alice:pw-9").decode()


def _app(log: RequestLog, target: str = "") -> web.Application:
    async def page(_request: web.Request) -> web.Response:
        return web.Response(text="<html></html>", content_type="text/html")

    async def away(request: web.Request) -> web.Response:
        raise web.HTTPFound(target + request.query.get("to", "/page"))

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/page", page)
    app.router.add_get("/away", away)
    return app


@pytest.fixture
def two_hosts() -> Iterator[tuple[str, str, RequestLog, RequestLog]]:
    log, other_log = RequestLog(), RequestLog()
    with (
        ServerThread(_app(other_log), host="127.0.0.2") as other,
        ServerThread(_app(log, other.base_url)) as site,
    ):
        yield site.base_url, other.base_url, log, other_log


def _credentials(host: str) -> HostCredentials:
    s = Settings(host_auth=((host, "alice", "PW", None),))
    return HostCredentials.from_settings(s, {"PW": "pw-9"})


async def test_a_followed_redirect_to_another_host_carries_no_authorization(
    two_hosts: tuple[str, str, RequestLog, RequestLog],
) -> None:
    base, _other, log, other_log = two_hosts
    fetcher = Fetcher(
        user_agent="t", address_guard=OPEN, credentials=_credentials("127.0.0.1"),
        record_exchanges=True,
    )  # fmt: skip
    async with fetcher:
        result = await fetcher.fetch(f"{base}/away")
    assert result.status == 200 and result.final_url.startswith("http://127.0.0.2:")
    assert log.headers("Authorization", "/away") == [BASIC]
    assert other_log.headers("Authorization", "/page") == [None]


async def test_the_exchange_holds_the_value_redacted_unless_kept(
    two_hosts: tuple[str, str, RequestLog, RequestLog],
) -> None:
    base, _other, log, _ = two_hosts
    for keep, expected in ((False, "[redacted]"), (True, BASIC)):
        fetcher = Fetcher(
            user_agent="t", address_guard=OPEN, credentials=_credentials("127.0.0.1"),
            record_exchanges=True, keep_auth=keep,
        )  # fmt: skip
        async with fetcher:
            result = await fetcher.fetch(f"{base}/page")
        assert result.exchange is not None
        sent = dict((k.lower(), v) for k, v in result.exchange.request_headers)
        assert sent["authorization"] == expected
    assert log.headers("Authorization", "/page") == [BASIC, BASIC]


async def test_a_host_port_key_matches_that_port_only(
    two_hosts: tuple[str, str, RequestLog, RequestLog],
) -> None:
    base, other, log, other_log = two_hosts
    other_key = other.removeprefix("http://")  # 127.0.0.2:PORT
    fetcher = Fetcher(user_agent="t", address_guard=OPEN, credentials=_credentials(other_key))
    async with fetcher:
        await fetcher.fetch(f"{base}/page")
        await fetcher.fetch(f"{other}/page")
    assert log.headers("Authorization", "/page") == [None]
    assert other_log.headers("Authorization", "/page") == [BASIC]


def test_a_host_matches_exactly_not_its_subdomains_nor_parents() -> None:
    creds = _credentials("docs.example.com")
    assert creds.for_url("https://docs.example.com/a") == BASIC
    assert creds.for_url("http://DOCS.example.com:8080/a") == BASIC  # any port, any case
    assert creds.for_url("https://a.docs.example.com/") is None
    assert creds.for_url("https://example.com/") is None
    assert creds.for_url("https://docs.example.com.evil.test/") is None
    assert "pw-9" not in repr(creds) and BASIC not in repr(creds)


def test_a_value_that_cannot_be_a_header_is_a_config_error_without_the_value() -> None:
    s = Settings(host_auth=(("a.test", None, None, "TOKEN"),))
    with pytest.raises(ConfigError) as caught:
        HostCredentials.from_settings(s, {"TOKEN": "abc\r\nX-Evil: 1"})
    assert "hosts.a.test.auth_token_env: environment variable TOKEN holds a character" in str(
        caught.value
    )
    assert "abc" not in str(caught.value)
    with pytest.raises(ConfigError, match="names environment variable TOKEN, which is not set"):
        HostCredentials.from_settings(s, {})
