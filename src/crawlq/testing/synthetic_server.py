"""`SyntheticServer`: a `SyntheticSite` served over HTTP/1.1 on loopback hosts, one port.

A small asyncio server (keep-alive, pipelining, GET and HEAD; no aiohttp in the request path,
so it stays cheap next to the crawler under test) on one or several loopback addresses
(``127.0.0.1`` … ``127.0.0.H``) sharing one port. Any path that is not a page of that host,
``/robots.txt`` included, answers 404.
"""

from __future__ import annotations

import asyncio
import socket
from functools import partial

from crawlq.errors import ConfigError
from crawlq.testing.synthetic_site import SyntheticSite
from crawlq.testing.thread import LoopThread

__all__ = ["SyntheticServer"]


class _HTTPProtocol(asyncio.Protocol):
    """HTTP/1.1 on one connection: keep-alive, pipelining, GET and HEAD only."""

    def __init__(self, site: SyntheticSite, host: int, counter: list[int]) -> None:
        self._site = site
        self._host = host
        self._counter = counter
        self._buf = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while self._transport is not None:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > 65536:
                    self._reply(b"431 Request Header Fields Too Large", b"", close=True)
                return
            head, self._buf = self._buf[:end], self._buf[end + 4 :]
            self._handle(head)

    def _handle(self, head: bytes) -> None:
        line, _, headers = head.partition(b"\r\n")
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            self._reply(b"400 Bad Request", b"", close=True)
            return
        method, target, version = parts
        lower = headers.lower()
        close = b"connection: close" in lower or (
            version == b"HTTP/1.0" and b"connection: keep-alive" not in lower
        )
        if method not in (b"GET", b"HEAD") or b"content-length:" in lower:
            self._reply(b"405 Method Not Allowed", b"", close=True)
            return
        page_id = self._site.page_at(self._host, target.split(b"?", 1)[0])
        self._counter[0] += 1
        if page_id is None:
            self._reply(b"404 Not Found", b"not found\n", close, b"text/plain", method == b"HEAD")
        else:
            body = self._site.page(page_id)
            self._reply(b"200 OK", body, close, b"text/html; charset=utf-8", method == b"HEAD")

    def _reply(
        self,
        status: bytes,
        body: bytes,
        close: bool,
        content_type: bytes = b"text/plain",
        head_only: bool = False,
    ) -> None:
        transport = self._transport
        if transport is None:
            return
        header = (
            b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type
            + b"\r\nContent-Length: " + str(len(body)).encode()
            + (b"\r\nConnection: close" if close else b"") + b"\r\n\r\n"
        )  # fmt: skip
        transport.write(header if head_only else header + body)
        if close:
            transport.close()
            self._transport = None


class SyntheticServer(LoopThread):
    """Serve a `SyntheticSite` of ``n_pages`` on ``hosts`` loopback addresses, one shared port.

    Host ``k`` (0-based) is ``127.0.0.{k + 1}``; Linux routes all of ``127.0.0.0/8`` to the
    loopback interface, so no set-up is needed. Serves from a background thread with its own
    event loop (`start`/`stop`, or a context manager), or in the caller's loop (`serve`)::

        with SyntheticServer(20_000, hosts=8) as server:
            crawl(server.site.root_url)  # then expect server.site.reachable_pages pages

    ``/robots.txt`` and any path that is not a page of that host answer 404.

    Args:
        n_pages: Pages in the site (at least 1).
        hosts: Number of loopback hosts, 1..254.
        port: TCP port on every host; 0 picks one that is free on all of them.
        seed: Seed of the site (see `SyntheticSite`).

    Raises:
        ConfigError: ``n_pages`` or ``hosts`` out of range (the message names it).
    """

    def __init__(self, n_pages: int, hosts: int = 1, port: int = 0, seed: int = 1) -> None:
        if not 1 <= hosts <= 254:
            raise ConfigError("hosts", f"must be in 1..254, got {hosts}")
        if n_pages < 1:
            raise ConfigError("n_pages", f"must be at least 1, got {n_pages}")
        super().__init__()
        self.n_pages = n_pages
        self.hosts = hosts
        self.seed = seed
        self._requested_port = port
        self._sockets: list[socket.socket] = []
        self._site: SyntheticSite | None = None
        self._counter = [0]

    @property
    def addresses(self) -> list[str]:
        """The loopback addresses served, ``127.0.0.1`` first."""
        return [f"127.0.0.{k + 1}" for k in range(self.hosts)]

    @property
    def site(self) -> SyntheticSite:
        """The site served (its base URLs carry the bound port).

        Raises:
            RuntimeError: The sockets are not bound yet.
        """
        if self._site is None:
            raise RuntimeError("SyntheticServer is not bound; call start() or bind() first")
        return self._site

    @property
    def requests(self) -> int:
        """Requests answered so far (pages and 404s)."""
        return self._counter[0]

    def bind(self, attempts: int = 20) -> None:
        """Bind one listening socket per host on one port and build the site.

        Args:
            attempts: Ports to try when ``port`` is 0 and a picked port is taken on some host.

        Raises:
            OSError: The port (or, with port 0, every port tried) is taken on some host.
        """
        for attempt in range(attempts):
            socks: list[socket.socket] = []
            try:
                port = self._requested_port
                for address in self.addresses:
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    socks.append(sock)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((address, port))
                    sock.listen(1024)
                    sock.setblocking(False)
                    port = sock.getsockname()[1]
            except OSError:
                for sock in socks:
                    sock.close()
                if self._requested_port or attempt == attempts - 1:
                    raise
                continue
            self._sockets = socks
            self._site = SyntheticSite(
                self.n_pages, [f"http://{a}:{port}" for a in self.addresses], self.seed
            )
            return

    async def serve(self, stop: asyncio.Event) -> None:
        """Serve in the running loop until ``stop`` is set (binds first if needed).

        Raises:
            OSError: The sockets cannot be bound (see `bind`).
        """
        if not self._sockets:
            self.bind()
        loop = asyncio.get_running_loop()
        site = self.site
        servers = [
            await loop.create_server(partial(_HTTPProtocol, site, k, self._counter), sock=sock)
            for k, sock in enumerate(self._sockets)
        ]
        try:
            await stop.wait()
        finally:
            for server in servers:
                server.close()
                await server.wait_closed()
            self._sockets = []

    _thread_name = "crawlq-synthetic"

    def start(self, timeout_s: float = 10.0) -> None:
        """Bind, then serve from a background thread; returns once serving.

        Args:
            timeout_s: Seconds to wait for the server thread to come up.

        Raises:
            RuntimeError: Already started, or the thread did not come up in time.
            OSError: The sockets cannot be bound (see `bind`).
        """
        if self._thread is None:
            self.bind()
        super().start(timeout_s)

    async def _serve(self, stop: asyncio.Event) -> None:
        asyncio.get_running_loop().call_soon(self._ready.set)
        await self.serve(stop)
