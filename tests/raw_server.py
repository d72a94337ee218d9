"""A loopback server that sends hand-written HTTP responses byte for byte.

aiohttp's server normalises what it sends (it adds a ``Content-Type``, refuses two
``Content-Encoding`` lines, speaks HTTP/1.1); this one writes exactly the bytes a test gives
it, one response per connection, then closes. It runs on its own thread (`LoopThread`), so
both an in-process crawl and a crawl in a child process can use it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from crawlq.testing import LoopThread

Route = bytes | Callable[[], Iterable[bytes]]
"""A whole response, or a function giving it in chunks (for bodies too big to hold)."""

NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def response(
    body: bytes,
    headers: Iterable[tuple[str, str]] = (("Content-Type", "text/html"),),
    *,
    status: str = "200 OK",
) -> bytes:
    """An HTTP/1.1 response with ``headers`` (each its own line), Content-Length and close."""
    lines = [f"HTTP/1.1 {status}", *(f"{name}: {value}" for name, value in headers)]
    lines += [f"Content-Length: {len(body)}", "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class RawServer(LoopThread):
    """Serve ``routes`` (path -> response) on 127.0.0.1; other paths answer 404.

    ``requests`` counts the paths asked for (query strings dropped), thread-safely.
    """

    def __init__(self, routes: Mapping[str, Route]) -> None:
        super().__init__()
        self.routes = dict(routes)
        self.port = 0
        self._lock = threading.Lock()
        self._requests: Counter[str] = Counter()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> Counter[str]:
        with self._lock:
            return Counter(self._requests)

    async def _serve(self, stop: asyncio.Event) -> None:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await stop.wait()
        finally:
            server.close()
            await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode("latin-1").split("?", 1)[0]
            with self._lock:
                self._requests[path] += 1
            route = self.routes.get(path, NOT_FOUND)
            for chunk in [route] if isinstance(route, bytes) else route():
                writer.write(chunk)
                await writer.drain()
            writer.close()  # the end of a body without Content-Length
            await writer.wait_closed()
        except (ConnectionError, asyncio.IncompleteReadError):
            writer.transport.abort()  # the client stopped reading (over its cap) or went away
