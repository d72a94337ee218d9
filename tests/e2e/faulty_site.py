"""A real site (the corpus) with a share of its pages failing: for counters that must add up.

Pages whose path hashes to ``0…`` answer 500 (dead letters after the retries); pages whose
path hashes to ``1…`` are disallowed by robots.txt (filtered records); the rest are served
as they are. The choice depends only on the path, so every crawl of it ends the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from crawlq.testing.static import make_static_app


def _bucket(path: str) -> str:
    if path.endswith("/index.html"):  # the seed: always served
        return "-"
    return hashlib.sha1(path.encode()).hexdigest()[0]


def make_faulty_app(root: Path) -> web.Application:
    """The static site under ``root`` with 500s and a robots.txt (module docstring)."""
    disallowed = sorted(
        "/" + p.relative_to(root).as_posix()
        for p in root.rglob("*.html")
        if _bucket("/" + p.relative_to(root).as_posix()) == "1"
    )
    robots = "User-agent: *\n" + "".join(f"Disallow: {p}\n" for p in disallowed)

    @web.middleware
    async def faults(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(text=robots)
        if request.path.endswith(".html") and _bucket(request.path) == "0":
            return web.Response(status=500, text="broken on purpose")
        return await handler(request)

    app = make_static_app(root)
    app.middlewares.insert(0, faults)
    return app
