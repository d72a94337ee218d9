"""Loopback proxies for tests: an HTTP proxy (absolute-URI forwarding, CONNECT) and SOCKS5.

Each runs its asyncio server on a thread of its own (``with HttpProxy() as proxy:``) and logs
what it was asked, so a test reads the proxy's own log as evidence: ``proxy.log`` holds one
``"GET http://host:port/path"``, ``"CONNECT host:port"`` or ``"SOCKS host:port"`` line per
request or tunnel, and ``proxy.auth`` the credentials each presented (None when none).

* `HttpProxy(user=, password=)`: requires ``Proxy-Authorization`` Basic when ``user`` is set
  (a 407 otherwise); ``fail=True`` answers every request ``502`` with ``Proxy-Status:
  testproxy; error=proxy_internal_error`` (a proxy failing by itself, RFC 9209).
* `Socks5Proxy(user=, password=)`: RFC 1928 CONNECT, no authentication or RFC 1929
  username/password when ``user`` is set; domain names are resolved by the proxy.

Each forwarded request is sent to the origin with ``Connection: close`` and the answer piped
back, then both connections close: small and enough for a test.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from types import TracebackType
from urllib.parse import urlsplit

__all__ = ["HttpProxy", "Socks5Proxy"]


class _ProxyThread:
    """An asyncio server on its own thread, bound to 127.0.0.1 on a free port."""

    def __init__(self, user: str | None = None, password: str | None = None) -> None:
        self.user, self.password = user, password
        self.log: list[str] = []
        self.auth: list[str | None] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def address(self) -> str:
        """``host:port`` it listens on."""
        return f"127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._tracked, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()

    async def _tracked(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        try:
            await self._handle(reader, writer)
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def __enter__(self) -> _ProxyThread:
        self._thread.start()
        self._started.wait(10)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for writer in self._writers:
                writer.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.close()


async def _both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Pipe both ways until either side closes; close the upstream connection after."""
    try:
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    finally:
        up_writer.close()


async def _tunnel(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int
) -> bool:
    """Connect to ``host:port`` and pipe both ways until either side closes."""
    try:
        up_reader, up_writer = await asyncio.open_connection(host, port)
    except OSError:
        return False
    await _both(reader, writer, up_reader, up_writer)
    return True


class HttpProxy(_ProxyThread):
    """A loopback HTTP proxy (module docstring)."""

    def __init__(
        self, user: str | None = None, password: str | None = None, *, fail: bool = False
    ) -> None:
        super().__init__(user, password)
        self.fail = fail

    def __enter__(self) -> HttpProxy:
        super().__enter__()
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = [*lines[0].split(" "), "", ""][:3]
        headers = [line for line in lines[1:] if line]
        auth = next(
            (h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("proxy-auth")),
            None,
        )
        self.log.append(f"{method} {target}")
        self.auth.append(auth)
        if self.fail:
            await _answer(
                writer,
                b"502 Bad Gateway",
                b"Proxy-Status: testproxy; error=proxy_internal_error\r\n",
            )
            return
        if self.user is not None:
            wanted = (
                "Basic " + base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode()
            )
            if auth != wanted:
                await _answer(
                    writer,
                    b"407 Proxy Authentication Required",
                    b'Proxy-Authenticate: Basic realm="t"\r\n',
                )
                return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            if not await _tunnel(reader, writer, host.strip("[]"), int(port)):
                writer.close()
            return
        await self._forward(method, target, headers, reader, writer)

    async def _forward(
        self,
        method: str,
        target: str,
        headers: list[str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        parts = urlsplit(target)
        kept = [
            h for h in headers
            if h.split(":", 1)[0].strip().lower()
            not in ("proxy-authorization", "proxy-connection", "connection", "keep-alive")
        ]  # fmt: skip
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            up_reader, up_writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        except OSError:
            await _answer(writer, b"502 Bad Gateway", b"")
            return
        head = "\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close", "", ""])
        up_writer.write(head.encode("latin-1"))
        await up_writer.drain()
        await _both(reader, writer, up_reader, up_writer)


async def _answer(writer: asyncio.StreamWriter, status: bytes, extra: bytes) -> None:
    writer.write(
        b"HTTP/1.1 " + status + b"\r\n" + extra + b"Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        await writer.drain()
        writer.close()


class Socks5Proxy(_ProxyThread):
    """A loopback SOCKS5 proxy (module docstring)."""

    def __enter__(self) -> Socks5Proxy:
        super().__enter__()
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._socks(reader, writer)
        except (asyncio.IncompleteReadError, OSError):
            writer.close()

    async def _socks(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _version, count = await reader.readexactly(2)
        methods = await reader.readexactly(count)
        wanted = 2 if self.user is not None else 0
        if wanted not in methods:
            writer.write(b"\x05\xff")
            writer.close()
            return
        writer.write(bytes([5, wanted]))
        auth = None
        if wanted == 2:  # RFC 1929
            _v, ulen = await reader.readexactly(2)
            user = (await reader.readexactly(ulen)).decode()
            (plen,) = await reader.readexactly(1)
            password = (await reader.readexactly(plen)).decode()
            auth = f"{user}:{password}"
            ok = user == self.user and password == (self.password or "")
            writer.write(b"\x01\x00" if ok else b"\x01\x01")
            if not ok:
                self.log.append("SOCKS auth refused")
                self.auth.append(auth)
                writer.close()
                return
        _v, _cmd, _rsv, atyp = await reader.readexactly(4)
        if atyp == 3:
            (length,) = await reader.readexactly(1)
            host = (await reader.readexactly(length)).decode()
        elif atyp == 1:
            host = ".".join(str(b) for b in await reader.readexactly(4))
        else:
            writer.write(b"\x05\x08\x00\x01" + bytes(6))
            writer.close()
            return
        port = int.from_bytes(await reader.readexactly(2), "big")
        self.log.append(f"SOCKS {host}:{port}")
        self.auth.append(auth)
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.write(b"\x05\x05\x00\x01" + bytes(6))  # connection refused
            writer.close()
            return
        writer.write(b"\x05\x00\x00\x01" + bytes(6))
        await writer.drain()
        await _both(reader, writer, up_reader, up_writer)
