"""The dashboard's web server (aiohttp.web): the jobs it watches, its pages, who may see them.

Routes: ``/`` the page (with ``?q=URL&job=J``, the search box's answer in it, so a search
works without the script and can be linked to), ``/panel`` the job sections the script
swaps in, ``/inspect?q=URL&job=J`` the search box's answer alone, ``/api/jobs`` each job's
report as JSON (``crawlq status --json``'s, ``paused`` included), ``/static/dashboard.css``
and ``.js``.

Who may see it: bound to 127.0.0.1 by default (`is_loopback`). Bound to any other address it
needs a token, and with a token every request must carry it (an ``Authorization: Bearer
TOKEN`` header, a ``token`` query parameter or the cookie `TOKEN_COOKIE` set when one was
given that way), compared in constant time (`hmac.compare_digest`); a request without it gets
401 and nothing else (`token_middleware`). Every response carries `SECURITY_HEADERS` (a
same-origin Content Security Policy, no caching).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from crawlq.dashboard import render
from crawlq.dashboard.history import JobWatch
from crawlq.dashboard.lookup import Lookup, lookup
from crawlq.errors import ConfigError, CrawlqError
from crawlq.ops.report import job_report

__all__ = [
    "SECURITY_HEADERS",
    "TOKEN_COOKIE",
    "Dashboard",
    "headers_middleware",
    "is_loopback",
    "make_app",
    "serve",
    "token_middleware",
]

logger = logging.getLogger(__name__)

_MAX_JOBS = 50  # jobs a dashboard without --job shows at most


@dataclass
class Dashboard:
    """What the server shows.

    Args:
        frontier_url: The Redis of the jobs.
        jobs: The jobs to show (fixed with ``--job``), else those found on the Redis.
        store_url: The store to read (None: each job's own).
        interval_s: Seconds between two samples (and two refreshes of the page).
        fixed: ``jobs`` was given: do not look for other jobs.
    """

    frontier_url: str
    jobs: list[str]
    store_url: str | None = None
    interval_s: float = 2.0
    fixed: bool = True
    watches: dict[str, JobWatch] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for job in self.jobs:
            self.watches[job] = JobWatch(self.frontier_url, job, self.store_url)

    async def discover(self) -> None:
        """Add the jobs that appeared on the Redis (when no ``--job`` was given)."""
        if self.fixed:
            return
        from crawlq.frontier.redis.jobs import JobAdmin

        admin = JobAdmin.open(self.frontier_url)
        try:
            names = (await admin.names())[:_MAX_JOBS]
        finally:
            await admin.close()
        for job in names:
            if job not in self.watches:
                self.watches[job] = JobWatch(self.frontier_url, job, self.store_url)
                self.jobs.append(job)

    async def sample_forever(self) -> None:
        """Sample every job every ``interval_s`` seconds until cancelled."""
        while True:
            with contextlib.suppress(CrawlqError):
                await self.discover()
            await asyncio.gather(*(w.sample() for w in self.watches.values()))
            await asyncio.sleep(self.interval_s)

    async def fresh(self) -> list[JobWatch]:
        """Every job with a report read now (a page shows the numbers of its request)."""

        async def read(w: JobWatch) -> None:
            try:
                w.observe(await job_report(self.frontier_url, w.job))
                w.error = None
            except CrawlqError as exc:
                w.error = str(exc)

        watches = list(self.watches.values())
        await asyncio.gather(*(read(w) for w in watches))
        return watches

    async def close(self) -> None:
        """Close the stores."""
        for w in self.watches.values():
            await w.close()


def make_app(dashboard: Dashboard, *, token: str | None = None) -> web.Application:
    """The aiohttp application serving ``dashboard`` (checks ``token`` when given)."""
    middlewares = [headers_middleware] + ([token_middleware(token)] if token is not None else [])
    app = web.Application(middlewares=middlewares)

    async def index(request: web.Request) -> web.Response:
        watches = await dashboard.fresh()
        found = await search(request) if "q" in request.query else None
        html = render.page(watches, dashboard.jobs, dashboard.interval_s, found)
        return web.Response(text=html, content_type="text/html")

    async def panel(request: web.Request) -> web.Response:
        return web.Response(text=render.panel(await dashboard.fresh()), content_type="text/html")

    async def search(request: web.Request) -> Lookup:
        query = request.query.get("q", "")
        job = request.query.get("job") or (dashboard.jobs[0] if dashboard.jobs else "")
        if job not in dashboard.watches:
            return Lookup(query.strip(), job, error=f"job {job!r} is not on this dashboard")
        return await lookup(query, dashboard.frontier_url, job, dashboard.store_url)

    async def inspect(request: web.Request) -> web.Response:
        result = await search(request)
        return web.Response(text=render.search_result(result), content_type="text/html")

    async def jobs(request: web.Request) -> web.Response:
        watches = await dashboard.fresh()
        return web.json_response({w.job: w.report for w in watches})

    app.router.add_get("/", index)
    app.router.add_get("/panel", panel)
    app.router.add_get("/inspect", inspect)
    app.router.add_get("/api/jobs", jobs)
    app.router.add_get(
        "/static/dashboard.js",
        lambda _: _static(render.JS, "application/javascript"),
    )
    app.router.add_get("/static/dashboard.css", lambda _: _static(render.CSS, "text/css"))
    return app


async def _static(text: str, kind: str) -> web.Response:
    return web.Response(text=text, content_type=kind)


async def serve(
    dashboard: Dashboard,
    host: str,
    port: int,
    token: str | None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve ``dashboard`` on ``host:port`` until cancelled; ``announce`` gets its URL.

    Raises:
        ConfigError: ``host`` is not a loopback address and no ``token`` is given, or the
            port cannot be bound.
    """
    if token is not None and not token:
        raise ConfigError("token", "must not be empty")
    if token is None and not is_loopback(host):
        raise ConfigError("token", f"binding the dashboard to {host} (not loopback) needs --token")
    runner = web.AppRunner(make_app(dashboard, token=token), access_log=None)
    await runner.setup()
    sampler = asyncio.create_task(dashboard.sample_forever())
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise ConfigError(
                "port", f"cannot serve the dashboard on {host}:{port}: {exc}"
            ) from exc
        if announce is not None:
            announce(f"http://{host}:{port}/")
        await asyncio.Event().wait()
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        await runner.cleanup()
        await dashboard.close()


TOKEN_COOKIE = "crawlq_dashboard_token"

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Headers of every dashboard response."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@web.middleware
async def headers_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Add `SECURITY_HEADERS` to the response."""
    response = await handler(request)
    response.headers.update(SECURITY_HEADERS)
    return response


def token_middleware(token: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    """A middleware that answers 401 to a request without ``token`` (module docstring)."""
    expected = token.encode()

    @web.middleware
    async def check(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        given = ""
        header = request.headers.get("Authorization", "")
        from_query = False
        if header.startswith("Bearer "):
            given = header[len("Bearer ") :]
        elif "token" in request.query:
            given, from_query = request.query["token"], True
        else:
            given = request.cookies.get(TOKEN_COOKIE, "")
        if not hmac.compare_digest(given.encode(), expected):
            return web.Response(status=401, text="401: this dashboard needs its token\n")
        response = await handler(request)
        if from_query:  # the page's own requests then carry it as a cookie
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
        return response

    return check
