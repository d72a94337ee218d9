"""The fault server's mutable state, and the small HTML helpers its endpoints share.

A test changes `FaultState` between requests (robots.txt, the ``/switch`` flag) through
`fault_state`; counters keyed by ``kind:key`` make ``/flaky``, ``/busy`` and the like fail a
set number of times per key.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from html import escape

from aiohttp import web

__all__ = ["FAULT_STATE", "FaultState", "bump", "fault_state", "html", "html_response"]


@dataclass
class FaultState:
    """Mutable state of one fault application; change it between requests in a test.

    Attributes:
        robots_txt: Body served at ``/robots.txt``.
        robots_status: Status served at ``/robots.txt``.
        robots_headers: Extra headers served at ``/robots.txt`` (``Location`` for redirects).
        counters: Requests seen per counter key (``flaky:KEY``, ``retry-after:KEY``).
        switch_down: ``/switch/{name}`` answers 503 while True.
    """

    robots_txt: str = "User-agent: *\nDisallow: /private/\n"
    robots_status: int = 200
    robots_headers: dict[str, str] = field(default_factory=dict)
    counters: collections.Counter[str] = field(default_factory=collections.Counter)
    switch_down: bool = False


FAULT_STATE = web.AppKey("crawlq_fault_state", FaultState)
"""Where `make_fault_app` keeps its `FaultState` (``app[FAULT_STATE]``)."""


def fault_state(app: web.Application) -> FaultState:
    """Return the mutable `FaultState` of an application built by `make_fault_app`."""
    return app[FAULT_STATE]


def html(title: str, body: str = "", meta: str = "") -> str:
    """A small HTML page: ``title`` as its title and heading, then ``body`` (HTML)."""
    return (
        f"<!DOCTYPE html>\n<html><head>{meta}<title>{escape(title)}</title></head>\n"
        f"<body><h1>{escape(title)}</h1>\n{body}</body></html>\n"
    )


def html_response(title: str, body: str = "", status: int = 200) -> web.Response:
    """`html` as a ``text/html`` response with ``status``."""
    return web.Response(text=html(title, body), status=status, content_type="text/html")


def bump(request: web.Request, kind: str) -> int:
    """Count one more request of ``kind`` for the URL's ``{key}``; return the new count."""
    counters = request.app[FAULT_STATE].counters
    key = f"{kind}:{request.match_info['key']}"
    counters[key] += 1
    return counters[key]
