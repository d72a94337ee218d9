"""`ServerThread`: run an aiohttp application on a loopback address from synchronous code.

`LoopThread` is the part it shares with `crawlq.testing.synthetic.SyntheticServer`: a
background thread with its own event loop, started and stopped from synchronous code.
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from types import TracebackType
from typing import Self

from aiohttp import web

__all__ = ["LoopThread", "ServerThread"]


class LoopThread:
    """Serve something from a background thread with its own event loop.

    Subclasses implement `_serve`, which sets ``self._ready`` once serving and returns when
    its ``stop`` event is set. Use as a context manager, or call `start` and `stop`.
    """

    _thread_name = "crawlq-loop-thread"

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self, timeout_s: float = 10.0) -> None:
        """Start the thread; returns once it serves.

        Args:
            timeout_s: Seconds to wait for the thread to come up.

        Raises:
            RuntimeError: Already started, or it did not come up in time.
            OSError: Serving failed to start (an address could not be bound).
        """
        name = type(self).__name__
        if self._thread is not None:
            raise RuntimeError(f"{name} already started")
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"{name} did not start within {timeout_s} s")
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise self._error

    def stop(self) -> None:
        """Stop serving and wait for the thread to end (a no-op when not running)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        thread.join()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await self._serve(self._stop)

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported to start(); the thread must not die silently
            self._error = exc
            self._ready.set()

    async def _serve(self, stop: asyncio.Event) -> None:
        raise NotImplementedError


class ServerThread(LoopThread):
    """Serve an aiohttp application from a background thread with its own event loop.

    For synchronous tests (for example ones that run crawlq in a subprocess) and for simple
    serving commands. Use as a context manager, or call `start` and `stop`::

        with ServerThread(make_fault_app()) as server:
            urllib.request.urlopen(server.base_url + "/page/1")

    Handlers of clients that disconnect are cancelled, so a stuck ``/delay`` does not hold
    up shutdown.

    Args:
        app: The application to serve.
        host: A loopback address (``127.0.0.1``, ``127.0.0.2``, ``::1``, ``localhost``).
        port: TCP port; 0 picks a free one.
        shutdown_timeout_s: Seconds `stop` waits for running handlers before cancelling them.

    Raises:
        ValueError: ``host`` is not a loopback address.
    """

    def __init__(
        self,
        app: web.Application,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        shutdown_timeout_s: float = 1.0,
    ) -> None:
        if not _is_loopback(host):
            raise ValueError(f"ServerThread binds loopback addresses only, not {host!r}")
        super().__init__()
        self.app = app
        self.host = host
        self._requested_port = port
        self._shutdown_timeout_s = shutdown_timeout_s
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound TCP port.

        Raises:
            RuntimeError: The server is not running.
        """
        if self._port is None:
            raise RuntimeError("ServerThread is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://host:port`` without a trailing slash (IPv6 hosts in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    _thread_name = "crawlq-test-server"

    def stop(self) -> None:
        """Stop serving and wait for the thread to end (a no-op when not running)."""
        super().stop()
        self._port = None

    async def _serve(self, stop: asyncio.Event) -> None:
        runner = web.AppRunner(
            self.app,
            handler_cancellation=True,
            shutdown_timeout=self._shutdown_timeout_s,
            access_log=None,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self._requested_port)
            await site.start()
            self._port = int(runner.addresses[0][1])
            self._ready.set()
            await stop.wait()
        finally:
            await runner.cleanup()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
