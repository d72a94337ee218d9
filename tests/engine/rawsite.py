"""A loopback HTTP/1.1 server that answers from raw bytes and logs raw request targets.

For tests about what exactly goes over the wire: the bytes of a ``Location`` or a header
(which aiohttp's server would not send as given), and the request target as the crawler sent
it, query and percent-encoding included (`crawlq.testing.RequestLog` keeps the path only).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from types import TracebackType

Answer = Callable[[bytes], bytes]
"""Maps a request target (``/path?query`` as received) to the whole raw response."""


def response(
    body: bytes | str = b"",
    *,
    status: int = 200,
    headers: Iterable[tuple[bytes, bytes]] = ((b"Content-Type", b"text/html; charset=utf-8"),),
) -> bytes:
    """A raw HTTP/1.1 response with ``Content-Length`` and ``Connection: close``."""
    data = body.encode() if isinstance(body, str) else body
    lines = [b"HTTP/1.1 %d Answer" % status, *(name + b": " + value for name, value in headers)]
    lines += [b"Content-Length: %d" % len(data), b"Connection: close", b"", b""]
    return b"\r\n".join(lines) + data


class RawSite:
    """Serve ``answer`` on 127.0.0.1 (a port of its own) inside ``async with``.

    Attributes:
        base: ``http://127.0.0.1:PORT``, set on entry.
        port: The port, set on entry.
        targets: Every request target received, in order, as bytes.
    """

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.targets: list[bytes] = []
        self.base = ""
        self.port = 0
        self._server: asyncio.Server | None = None

    def count(self, target: bytes) -> int:
        """How many times ``target`` was requested."""
        return self.targets.count(target)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1]
            self.targets.append(target)
            writer.write(self.answer(target))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def __aenter__(self) -> RawSite:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        self.base = f"http://127.0.0.1:{self.port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
