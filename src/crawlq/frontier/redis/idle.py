"""The idle wait: a worker with nothing to lease blocks until work may be ready.

It registers in the job's ``idle`` set (``idle.lua``) and blocks on ``BLMOVE`` of the inbox
into its claim list, with a timeout that ends when the next host window opens, a retry falls
due or a lease expires. Pushes and settles that make a host ready leave one empty wake-up
token per idle worker on the inbox (``make_ready`` in ``_lib.lua``). No polling, except while
the inbox waits for room under a ``block`` bound, or while Redis is at its ``maxmemory``
(``BLMOVE`` is refused then), every `_FULL_INBOX_POLL_S` seconds. The entry that wakes a
worker is moved, never read: `_blocking_move` drops its bytes as they arrive, and
``drain_inbox.lua`` checks its size inside Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawlq.errors import FrontierError, FrontierFull
from crawlq.frontier.redis.client import RedisClient

__all__ = ["RedisIdle"]


_FULL_INBOX_POLL_S = 1.0  # how often a worker looks for room for waiting inbox entries
_DROP_CHUNK_BYTES = 64 * 1024  # the most of a moved element's bytes held at once


class RedisIdle(RedisClient):
    """The wait between two leases that found nothing."""

    async def _next_wake_ms(self) -> int | None:
        k = self.keys

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for key in (k.ready, k.delayed, k.leases):
                    pipe.zrange(key, 0, 0, withscores=True)
                return await pipe.execute()

        firsts = await self._call(read)
        times = [int(first[0][1]) for first in firsts if first]
        return min(times) if times else None

    async def _wait(self, worker_id: str, timeout_s: float, *, pending: bool) -> None:
        """Block until a wake-up token or a producer's entry arrives, or ``timeout_s`` passes.

        ``pending``: the caller's last look saw work in flight or delayed. If that work was
        settled before this worker registered as idle (so no token was left for it) and the
        job is now drained, return at once instead of sleeping out the timeout. While the job
        is paused, ready hosts do not shorten the wait.
        """
        k = self.keys
        now = self.clock.wall_ms()

        # Register as idle first, then look once more: a settle or push that ran before the
        # registration is visible to this look, and one after it leaves a token.
        keys = [*k.host_keys(), k.leases, k.delayed]
        first_ready, inbox_len, leased, delayed = await self._script("idle", keys, [now, worker_id])
        if self.paused:  # ready hosts wait for `crawlq job resume`, which leaves tokens
            first_ready = pending = False
        if first_ready:  # a settle that ran just before may have made a host ready soon
            timeout_s = min(timeout_s, (int(first_ready) - now) / 1000)
        drained_since = pending and not (first_ready or leased or delayed)
        if inbox_len and (self.inbox_full or self.full):  # entries wait: look again in a while
            await self._call(lambda: self.client.zrem(k.idle, worker_id))
            await asyncio.sleep(max(0.0, min(timeout_s, _FULL_INBOX_POLL_S)))
            return
        if timeout_s <= 0 or inbox_len or drained_since:
            await self._call(lambda: self.client.zrem(k.idle, worker_id))
            return
        if timeout_s < 0.25:
            # Redis times blocking commands out on its 100 ms clock (hz 10): a short
            # politeness wait is slept here instead, exactly.
            await self._call(lambda: self.client.zrem(k.idle, worker_id))
            await asyncio.sleep(timeout_s)
            return
        try:
            block_s = max(0.01, timeout_s - 0.1)  # hz 10 rounds up
            claim = k.claim(worker_id)
            if await self._call(lambda: _blocking_move(self.client, k.inbox, claim, block_s)):
                self._claim_pending.add(worker_id)
        except FrontierFull:  # BLMOVE may grow memory: refused at maxmemory, wait here instead
            self.full = True
            await asyncio.sleep(max(0.0, min(timeout_s, _FULL_INBOX_POLL_S)))
        finally:
            with contextlib.suppress(FrontierError):
                await self._call(lambda: self.client.zrem(k.idle, worker_id))


async def _blocking_move(client: Redis, source: str, destination: str, timeout_s: float) -> bool:
    """``BLMOVE source destination RIGHT RIGHT timeout_s``: whether an element was moved.

    The element itself is not read into memory: its bytes are dropped as they arrive, at most
    `_DROP_CHUNK_BYTES` at a time. An inbox entry may be as large as Redis allows (512 MB)
    and the idle wait only needs to know that one came (``drain_inbox.lua`` checks its size
    inside Redis, and returns only the size and first bytes of an entry over the limit).
    redis-py reads a reply whole, so the command is sent on a connection of the client's pool
    and its reply read here, from that connection's stream. A connection left mid-reply (an
    error, a timeout, a cancelled wait) is disconnected before it goes back to the pool.

    Args:
        client: The frontier's client; one connection of its pool is used.
        source: The list to take the element from (its right end: the oldest entry).
        destination: The list to put it on (its right end).
        timeout_s: Seconds Redis blocks while ``source`` is empty.

    Raises:
        redis.exceptions.ConnectionError: The connection failed or closed mid-reply.
        redis.exceptions.TimeoutError: No reply within the connection's ``socket_timeout``
            past ``timeout_s`` (when one is set).
        redis.exceptions.ResponseError: The server's error reply (the subclass redis-py
            gives it: ``LOADING`` is a ``BusyLoadingError``, ...), or a reply BLMOVE never
            gives.
    """
    pool = client.connection_pool
    conn = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        await conn.send_command("BLMOVE", source, destination, "RIGHT", "RIGHT", timeout_s)
        read_s = None if conn.socket_timeout is None else timeout_s + conn.socket_timeout
        try:
            return await asyncio.wait_for(_drop_reply(conn), read_s)
        except TimeoutError as exc:
            raise RedisTimeoutError(f"no reply to BLMOVE within {read_s} s") from exc
    except BaseException:
        await conn.disconnect(nowait=True)
        raise
    finally:
        await pool.release(conn)


async def _drop_reply(conn: AbstractConnection) -> bool:
    """Read a BLMOVE reply off ``conn``: True for an element (its bytes dropped), False for nil.

    RESP2 and RESP3 (https://redis.io/docs/latest/develop/reference/protocol-spec/): a bulk
    string ``$<n>`` is an element, ``$-1``, ``*-1`` and ``_`` are nil, ``-`` is an error.
    """
    stream = conn._reader
    if stream is None:
        raise RedisConnectionError("the connection closed before BLMOVE was answered")
    try:
        line = await stream.readuntil(b"\r\n")
        kind, rest = line[:1], line[1:-2]
        if kind == b"$" and int(rest) >= 0:
            left = int(rest) + 2  # the element and its CRLF
            while left:
                left -= len(await stream.readexactly(min(left, _DROP_CHUNK_BYTES)))
            return True
        if (kind in (b"$", b"*") and int(rest) == -1) or kind == b"_":
            return False
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise RedisConnectionError(f"BLMOVE's reply was cut off: {exc}") from exc
    if kind in (b"-", b"!"):
        raise conn._parser.parse_error(rest.decode("utf-8", "replace"))  # type: ignore[no-untyped-call]
    raise ResponseError(f"unexpected reply to BLMOVE: {line[:40]!r}")
