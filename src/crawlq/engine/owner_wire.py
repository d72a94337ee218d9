"""The private wire between an embedded crawl's owner process and its local worker processes.

``crawlq crawl`` without ``--frontier`` and with several processes (`crawlq.engine.local_crawl`)
keeps one process, the *owner*, in sole charge of the SQLite file (frontier and store); the
others are ordinary workers whose frontier and store are proxies
(`crawlq.engine.owner_client`) that call the owner's over a Unix socket
(`crawlq.engine.owner_server`). This module is what both ends agree on.

Frames: a 4-byte big-endian length, then that many bytes of payload (at most
`MAX_FRAME_BYTES`). A request is ``(call_id, target, method, args, kwargs)`` with ``target``
one of `FRONTIER`, `STORE` or `OWNER`; the answer is ``(call_id, True, result)`` or
``(call_id, False, (error_name, message))``. Calls on one connection run concurrently and may
be answered out of order (a lease may wait a second while the flusher writes). The server
answers only the methods of `SERVED` (the ones a worker calls); anything else is refused.

Payloads are pickled (`dumps`, `loads`). That is safe here and only here: the socket lives in
a directory of mode 0700 made for this one crawl, is itself 0600, and the owner accepts a
connection only from a process of this uid that it started (``SO_PEERCRED``). Whoever can
send on it can already read and write the owner's memory (same uid, ptrace), so unpickling
what it sends grants nothing new; and a pickle carries the project's own values (requests,
leases, result batches) without a JSON round trip that would validate and fingerprint every
request again. The read-only mappings of a request (`types.MappingProxyType`, which pickle
refuses) travel as dicts, and the two shared empty ones (``NO_COOKIES``, ``NO_HEADERS``) by
name, so identity checks against them hold on the other side. A request travels as its
field values, fingerprint included, and is rebuilt without being checked or fingerprinted
again (`request_of`): it was checked when it was made.
"""

from __future__ import annotations

import asyncio
import copyreg
import dataclasses
import io
import itertools
import operator
import pickle
import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from crawlq.errors import (
    FrontierError,
    FrontierUnavailable,
    StoreError,
    StoreUnavailable,
)
from crawlq.request import CrawlRequest
from crawlq.web.cookies import NO_COOKIES
from crawlq.web.headers import NO_HEADERS

__all__ = [
    "FRONTIER",
    "MAX_FRAME_BYTES",
    "OWNER",
    "SERVED",
    "STORE",
    "dumps",
    "error_of",
    "frame",
    "loads",
    "raised",
    "read_frame",
    "read_only",
    "request_of",
    "shared",
]

FRONTIER = "f"
STORE = "s"
OWNER = "o"

SERVED: dict[str, frozenset[str]] = {
    FRONTIER: frozenset(
        {
            "push",
            "lease",
            "renew",
            "ack",
            "retry",
            "dead",
            "release",
            "stats",
            "set_host_policy",
            "host_strike",
            "proxy_failure",
            "proxy_ok",
            "proxy_states",
            "robots_get",
            "robots_claim",
            "robots_put",
            "claim_item_keys",
        }
    ),
    STORE: frozenset({"write", "counts"}),
    OWNER: frozenset({"hello", "report"}),
}
"""The methods the owner answers, by target: what the worker loop calls, and nothing else."""

MAX_FRAME_BYTES = 1 << 30
"""Largest frame either side accepts, in bytes (a flush of pages with their bodies)."""

_LENGTH = struct.Struct(">I")
_SHARED: dict[str, Mapping[str, str]] = {"no_cookies": NO_COOKIES, "no_headers": NO_HEADERS}
_SHARED_IDS = {id(value): name for name, value in _SHARED.items()}


def read_only(data: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    """A read-only view of ``data`` (how a request's mappings are rebuilt on the other side)."""
    return MappingProxyType(data)


def shared(name: str) -> Mapping[str, str]:
    """One of the shared empty mappings, by name (``NO_COOKIES``, ``NO_HEADERS``)."""
    try:
        return _SHARED[name]
    except (KeyError, TypeError):
        raise pickle.UnpicklingError(f"unknown shared value {name!r}") from None


def _reduce_proxy(proxy: MappingProxyType[Any, Any]) -> tuple[Any, tuple[Any]]:
    name = _SHARED_IDS.get(id(proxy))
    if name is not None:
        return shared, (name,)
    return read_only, (dict(proxy),)


_REQUEST_FIELDS = tuple(f.name for f in dataclasses.fields(CrawlRequest))
_request_values = operator.attrgetter(*_REQUEST_FIELDS)
_set = object.__setattr__


def request_of(values: tuple[Any, ...]) -> CrawlRequest:
    """A `CrawlRequest` from its field values in order, as `dumps` wrote them (not re-checked)."""
    request = object.__new__(CrawlRequest)
    for _ in map(_set, itertools.repeat(request), _REQUEST_FIELDS, values):
        pass
    return request


def _reduce_request(request: CrawlRequest) -> tuple[Any, tuple[tuple[Any, ...]]]:
    return request_of, (_request_values(request),)


class _Pickler(pickle.Pickler):
    dispatch_table = {
        **copyreg.dispatch_table,
        MappingProxyType: _reduce_proxy,
        CrawlRequest: _reduce_request,
    }


def dumps(value: Any) -> bytes:
    """``value`` as a payload (module docstring)."""
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()


def loads(payload: bytes) -> Any:
    """The value of a payload written by `dumps`."""
    return pickle.loads(payload)


def frame(payload: bytes) -> bytes:
    """One frame: the length, then ``payload``.

    Raises:
        ValueError: ``payload`` is longer than `MAX_FRAME_BYTES`.
    """
    if len(payload) > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {len(payload)} bytes exceeds {MAX_FRAME_BYTES}")
    return _LENGTH.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame's payload, or None when the other side closed the connection.

    Raises:
        ValueError: A length over `MAX_FRAME_BYTES`.
        ConnectionError: The connection broke mid-frame.
    """
    try:
        header = await reader.readexactly(_LENGTH.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ConnectionResetError("connection closed inside a frame header") from exc
        return None
    (length,) = _LENGTH.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {length} bytes exceeds {MAX_FRAME_BYTES}")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise ConnectionResetError("connection closed inside a frame") from exc


_ERRORS: dict[str, type[Exception]] = {
    "FrontierUnavailable": FrontierUnavailable,
    "FrontierError": FrontierError,
    "StoreUnavailable": StoreUnavailable,
    "StoreError": StoreError,
    "ValueError": ValueError,
}


def error_of(exc: BaseException, target: str) -> tuple[str, str]:
    """How an error raised by the owner's backend travels: ``(name, message)``.

    The name is the nearest of the kinds a worker tells apart (outage or permanent, frontier
    or store, bad argument); anything else is a permanent error of ``target``'s side.
    """
    for cls in type(exc).__mro__:
        if cls.__name__ in _ERRORS and _ERRORS[cls.__name__] is cls:
            return cls.__name__, str(exc)
    return ("StoreError" if target == STORE else "FrontierError"), f"{type(exc).__name__}: {exc}"


def raised(name: str, message: str, target: str) -> Exception:
    """The exception a worker raises for an error `error_of` sent."""
    cls = _ERRORS.get(name)
    if cls is None:
        cls = StoreError if target == STORE else FrontierError
    return cls(message)
