"""`RequestLog`: what a test server saw, for politeness and single-flight assertions."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

__all__ = ["LoggedRequest", "RequestLog"]


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One request as the server saw it.

    Attributes:
        start_s: ``time.monotonic()`` seconds when the handler started.
        end_s: ``time.monotonic()`` seconds when the handler finished (response sent or
            connection dropped), or None while it runs.
        method: HTTP method.
        path: URL path, without the query.
        host: The ``Host`` header, lower-cased (``127.0.0.1:8080``: the form of
            `crawlq.urls.host_key`).
        cookie: The ``Cookie`` header as received (repeated headers joined with ``; ``),
            or None when there was none.
        headers: Every request header as received, ``(name, value)`` in order.
    """

    start_s: float
    end_s: float | None
    method: str
    path: str
    host: str
    cookie: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def header(self, name: str) -> str | None:
        """The first request header ``name`` (any case), or None."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


class RequestLog:
    """A thread-safe record of every request a test server handles.

    Pass one to `crawlq.testing.make_fault_app` or `crawlq.testing.make_static_app`; the
    server may run in another thread (`crawlq.testing.ServerThread`), and times come from
    ``time.monotonic()``, which is shared by every thread of the process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[_Entry] = []

    def requests(self, *, host: str | None = None, path: str | None = None) -> list[LoggedRequest]:
        """Return a snapshot of the requests, in start order, optionally filtered.

        Args:
            host: Keep only requests whose ``Host`` header equals this (case-insensitive).
            path: Keep only requests for this exact path.
        """
        with self._lock:
            entries = [
                LoggedRequest(e.start_s, e.end_s, e.method, e.path, e.host, e.cookie, e.headers)
                for e in self._entries
            ]
        return [
            e
            for e in entries
            if (host is None or e.host == host.lower()) and (path is None or e.path == path)
        ]

    def cookies(self, path: str | None = None, *, host: str | None = None) -> list[str | None]:
        """Return the ``Cookie`` header of each matching request, in start order (None: none)."""
        return [e.cookie for e in self.requests(host=host, path=path)]

    def headers(
        self, name: str, path: str | None = None, *, host: str | None = None
    ) -> list[str | None]:
        """Return request header ``name`` of each matching request, in start order (None: none)."""
        return [e.header(name) for e in self.requests(host=host, path=path)]

    def count(self, path: str | None = None, *, host: str | None = None) -> int:
        """Return how many requests matched ``path`` and ``host`` (None matches any)."""
        return len(self.requests(host=host, path=path))

    def clear(self) -> None:
        """Forget every request recorded so far."""
        with self._lock:
            self._entries.clear()

    def max_concurrency(self, host: str) -> int:
        """Return the largest number of requests to ``host`` that were in progress at once.

        A request counts from handler start to handler end; one still running counts until
        now. Requests that end exactly when another starts do not overlap.
        """
        events: list[tuple[float, int]] = []
        for entry in self.requests(host=host):
            events.append((entry.start_s, 1))
            events.append((entry.end_s if entry.end_s is not None else float("inf"), -1))
        events.sort()  # at equal times -1 sorts before +1: an end frees its slot first
        best = running = 0
        for _, delta in events:
            running += delta
            best = max(best, running)
        return best

    def min_gap_s(self, host: str) -> float | None:
        """Return the smallest time in seconds between two consecutive request starts to ``host``.

        Returns:
            Seconds, or None when fewer than two requests reached ``host``.
        """
        starts = sorted(e.start_s for e in self.requests(host=host))
        if len(starts) < 2:
            return None
        return min(b - a for a, b in itertools.pairwise(starts))

    def pace_violations(
        self, host: str, delay_s: float, jitter_s: float
    ) -> list[tuple[int, int, float]]:
        """Return the pairs of requests to ``host`` that came faster than ``delay_s`` allows.

        A crawler spaces the *lease* of each request to a host ``delay_s`` after the one before;
        the server sees a request when it is sent, which on a loaded machine can be late by a
        little (the lease-to-send latency). So the server's log satisfies, for the i-th and
        j-th request starts (i < j, in start order), ``start_j - start_i >= (j - i) * delay_s -
        jitter_s``: one late send may shorten a gap, but never the pace over a run of requests.
        That checks the rate over the whole crawl, which a per-gap check with room for the
        latency would not (a delay kept at half its value passes it).

        Args:
            host: The ``host:port`` key (`RequestLog.requests`).
            delay_s: The politeness delay, seconds.
            jitter_s: Room for one late send, seconds.

        Returns:
            ``(i, j, seconds between them)`` of each violating pair; empty when the log keeps
            the pace.
        """
        starts = sorted(e.start_s for e in self.requests(host=host))
        return [
            (i, j, starts[j] - starts[i])
            for i, j in itertools.combinations(range(len(starts)), 2)
            if starts[j] - starts[i] < (j - i) * delay_s - jitter_s
        ]

    def middleware(self) -> Middleware:
        """Return an aiohttp middleware that records each request into this log."""

        @web.middleware
        async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
            sent = request.headers.getall("Cookie", [])
            entry = _Entry(
                time.monotonic(),
                None,
                request.method,
                request.path,
                request.host.lower(),
                "; ".join(sent) if sent else None,
                tuple(request.headers.items()),
            )
            with self._lock:
                self._entries.append(entry)
            try:
                return await handler(request)
            finally:
                with self._lock:
                    entry.end_s = time.monotonic()

        return record


@dataclass(slots=True)
class _Entry:
    """The mutable twin of `LoggedRequest`, kept under the log's lock."""

    start_s: float
    end_s: float | None
    method: str
    path: str
    host: str
    cookie: str | None
    headers: tuple[tuple[str, str], ...] = ()
