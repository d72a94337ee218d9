"""https through proxies: a CONNECT tunnel to a loopback TLS server (a self-signed
certificate this test makes, trusted through ``SSL_CERT_FILE``), and an ``https://`` proxy
(TLS to the proxy itself). The proxy's log shows only the CONNECT: the page travelled
inside the tunnel's TLS, verified against the test's certificate."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from crawlq.testing import RequestLog, ServerThread
from crawlq.testing.proxy import HttpProxy
from tests.conftest import run_crawlq
from tests.services import need_service

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (openssl)."""
    if shutil.which("openssl") is None:
        need_service("no openssl binary to make a test certificate")
    where = tmp_path_factory.mktemp("tls")
    crt, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(crt), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return crt, key


def _context(cert: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*cert)
    return context


class TlsServerThread(ServerThread):
    """`ServerThread` serving https with the test's certificate."""

    def __init__(self, app: web.Application, context: ssl.SSLContext) -> None:
        super().__init__(app)
        self.context = context

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def _serve(self, stop: asyncio.Event) -> None:
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.context)
            await site.start()
            self._port = int(runner.addresses[0][1])
            self._ready.set()
            await stop.wait()
        finally:
            await runner.cleanup()


class TlsHttpProxy(HttpProxy):
    """`HttpProxy` that clients reach over TLS (an ``https://`` proxy)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self.context = context

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._tracked, "127.0.0.1", 0, ssl=self.context)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()


@pytest.fixture
def tls_site(cert: tuple[Path, Path]) -> Iterator[tuple[str, RequestLog]]:
    log = RequestLog()

    async def page(_request: web.Request) -> web.Response:
        return web.Response(text="<title>over tls</title>", content_type="text/html")

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/page", page)
    with TlsServerThread(app, _context(cert)) as server:
        yield server.base_url, log


def test_an_https_target_goes_through_a_connect_tunnel(
    cert: tuple[Path, Path], tls_site: tuple[str, RequestLog]
) -> None:
    base, log = tls_site
    trust = {"SSL_CERT_FILE": str(cert[0])}
    with HttpProxy() as proxy:
        proc = run_crawlq("fetch", f"{base}/page", "--proxy", f"http://{proxy.address}", env=trust)
        tunnels = list(proxy.log)
    assert "<title>over tls</title>" in proc.stdout
    host = base.removeprefix("https://")
    assert tunnels and set(tunnels) == {f"CONNECT {host}"}  # never a plain GET of the page
    assert log.count("/page") == 1  # the origin served it over TLS, inside the tunnel
    # without the test's CA the same fetch fails the certificate check: TLS was end to end
    with HttpProxy() as proxy:
        failed = run_crawlq(
            "fetch", f"{base}/page", "--proxy", f"http://{proxy.address}", check=False
        )
    assert failed.returncode != 0 and "over tls" not in failed.stdout
    assert "tls_error" in failed.stdout + failed.stderr


def test_an_https_proxy_is_reached_over_tls(
    cert: tuple[Path, Path], tls_site: tuple[str, RequestLog]
) -> None:
    base, log = tls_site
    trust = {"SSL_CERT_FILE": str(cert[0])}
    with TlsHttpProxy(_context(cert)) as proxy:
        proc = run_crawlq("fetch", f"{base}/page", "--proxy", f"https://{proxy.address}", env=trust)
        tunnels = list(proxy.log)
    assert "<title>over tls</title>" in proc.stdout
    assert tunnels and set(tunnels) == {f"CONNECT {base.removeprefix('https://')}"}
    assert log.count("/page") == 1
