"""The owner's side: serve its frontier and store to the worker processes it started.

`OwnerServer` listens on a Unix socket in a private directory (mode 0700, the socket 0600) and
answers the calls of `crawlq.engine.owner_wire.SERVED` from the processes it was told about
(`OwnerServer.allow`: their pids, checked with ``SO_PEERCRED``, and this uid), each call on
the real frontier or store of this process. Only this process opens the SQLite file, so the
frontier's own rules hold across every process unchanged: it alone decides leases, so a host's
politeness (its delay, its concurrency) is exact, and dedup, priorities and the store's upserts
are what they are in one process.

A worker that goes away (it exited, or was killed with SIGKILL) leaves leases behind: the
server remembers which leases each connection holds (leased and not yet settled) and, when
the connection closes, expires them at once (`WorkQueue.renew` with a deadline of now), so
they go back to the queue within a lease call instead of after the hold (15 s), their attempt
counted as for any expired lease (a page that kills its worker ends as a dead letter after
its retries, instead of looping).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import struct
import tempfile
from collections.abc import Callable
from typing import Any

from crawlq.engine.owner_wire import (
    FRONTIER,
    OWNER,
    SERVED,
    STORE,
    dumps,
    error_of,
    frame,
    loads,
    read_frame,
)
from crawlq.errors import CrawlqError
from crawlq.frontier import Frontier
from crawlq.request import Lease
from crawlq.store import Store

__all__ = ["EXPIRE_NOW_S", "OwnerServer"]

logger = logging.getLogger(__name__)

EXPIRE_NOW_S = 0.001
"""The hold, in seconds, given to the leases of a worker that went away: they expire now."""

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class _Connection:
    """One worker process: its writer, its calls running, the leases it holds."""

    def __init__(self, writer: asyncio.StreamWriter, pid: int) -> None:
        self.writer = writer
        self.pid = pid
        self.calls: set[asyncio.Task[None]] = set()
        self.held: dict[str, Lease] = {}

    def answer(self, payload: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(frame(payload))

    def track(self, method: str, args: tuple[Any, ...], result: Any) -> None:
        """Keep ``held`` up to date with a call that returned ``result``."""
        if method == "lease":
            for lease in result:
                self.held[lease.lease_id] = lease
        elif method == "renew":
            for lease in args[0]:
                self.held.pop(lease.lease_id, None)
            for lease in result:
                self.held[lease.lease_id] = lease
        elif method in ("ack", "release"):
            for lease in args[0]:
                self.held.pop(lease.lease_id, None)
        elif method in ("retry", "dead"):
            self.held.pop(args[0].lease_id, None)


class OwnerServer:
    """Serves ``frontier`` and ``store`` to local worker processes (module docstring).

    Args:
        frontier: This process's frontier (it owns the file).
        store: This process's store.
        hello: What a worker gets first (its settings, the frontier's politeness and bounds,
            its page budget), given the worker's pid.
    """

    def __init__(
        self, frontier: Frontier, store: Store, hello: Callable[[int], dict[str, Any]]
    ) -> None:
        self.frontier = frontier
        self.store = store
        self.hello = hello
        self.reports: dict[int, dict[str, Any]] = {}
        """What each worker reported when it ended (`WorkerCounters.as_json`), by pid."""
        self.path = ""
        self._dir: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._pids: set[int] = set()
        self._connections: set[_Connection] = set()
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        """Listen; returns the socket's path (in a new directory only this uid can enter)."""
        self._dir = tempfile.mkdtemp(prefix="crawlq-owner-")  # mode 0700
        self.path = os.path.join(self._dir, "owner.sock")
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)
        os.chmod(self.path, 0o600)
        return self.path

    def allow(self, pid: int) -> None:
        """Accept connections from process ``pid`` (a worker this process started)."""
        self._pids.add(pid)

    @property
    def held(self) -> int:
        """Leases held by the connected workers now."""
        return sum(len(c.held) for c in self._connections)

    async def close(self) -> None:
        """Stop listening, end every connection (their leases expire), remove the socket."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.writer.close()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            pid = self._peer(writer)
            if pid is None:
                writer.close()
                return
            conn = _Connection(writer, pid)
            self._connections.add(conn)
            try:
                await self._read_calls(reader, conn)
            finally:
                self._connections.discard(conn)
                if conn.calls:  # a lease waiting for work returns within its wait
                    await asyncio.gather(*conn.calls, return_exceptions=True)
                writer.close()
                await self._expire(conn)
        finally:
            if task is not None:
                self._handlers.discard(task)

    def _peer(self, writer: asyncio.StreamWriter) -> int | None:
        """The pid of the connected process, or None when it is not one this process started."""
        sock = writer.get_extra_info("socket")
        try:
            pid, uid, _ = _PEERCRED.unpack(
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            )
        except (OSError, AttributeError) as exc:
            logger.warning("refused a connection to the owner socket: %s", exc)
            return None
        if uid != os.getuid() or pid not in self._pids:
            logger.warning("refused a connection to the owner socket from pid %d uid %d", pid, uid)
            return None
        return int(pid)

    async def _read_calls(self, reader: asyncio.StreamReader, conn: _Connection) -> None:
        while True:
            try:
                payload = await read_frame(reader)
            except (ConnectionError, ValueError) as exc:
                logger.warning("worker process %d: connection lost (%s)", conn.pid, exc)
                return
            if payload is None:
                return
            try:
                call_id, target, method, args, kwargs = loads(payload)
            except Exception as exc:  # a garbled frame ends the connection
                logger.warning("worker process %d sent an unreadable call: %s", conn.pid, exc)
                return
            call = asyncio.create_task(self._answer(conn, call_id, target, method, args, kwargs))
            conn.calls.add(call)
            call.add_done_callback(conn.calls.discard)

    async def _answer(
        self,
        conn: _Connection,
        call_id: int,
        target: str,
        method: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        try:
            if method not in SERVED.get(target, ()):
                raise ValueError(f"{target}.{method} is not served to worker processes")
            if target == OWNER:
                result = self._owner_call(conn, method, args)
            else:
                backend: Any = self.frontier if target == FRONTIER else self.store
                result = await getattr(backend, method)(*args, **kwargs)
                if target == FRONTIER:
                    conn.track(method, args, result)
            reply = (call_id, True, result)
        except Exception as exc:  # every error goes back to its caller
            reply = (call_id, False, error_of(exc, target if target == STORE else FRONTIER))
        conn.answer(dumps(reply))

    def _owner_call(self, conn: _Connection, method: str, args: tuple[Any, ...]) -> Any:
        if method == "hello":
            logger.info("worker process %d connected", conn.pid)
            return self.hello(conn.pid)
        report = args[0]
        if not isinstance(report, dict):
            raise ValueError("a report is a dict")
        self.reports[conn.pid] = report
        return None

    async def _expire(self, conn: _Connection) -> None:
        """Expire the leases a worker that went away still held (module docstring)."""
        if not conn.held:
            return
        held = list(conn.held.values())
        conn.held.clear()
        with contextlib.suppress(CrawlqError):  # else they expire after their hold
            await self.frontier.renew(held, EXPIRE_NOW_S)
            logger.warning(
                "worker process %d went away holding %d leases: back in the queue",
                conn.pid,
                len(held),
            )
