"""A loopback site of sitemaps for the sitemap tests (both engines).

`SitemapSite` serves ``/robots.txt`` (its `robots` text), every file put in `files` (status,
headers, body), and a page with no links at any ``/p/...`` path; anything else is 404. Every
request is recorded in its `RequestLog`.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from html import escape

from aiohttp import web

from crawlq.testing.request_log import RequestLog

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


@dataclass
class SitemapSite:
    log: RequestLog = field(default_factory=RequestLog)
    robots: str = "User-agent: *\nDisallow: /private/\n"
    files: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.log.middleware()])
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        return app

    def put(
        self, path: str, body: bytes, content_type: str = "application/xml", **headers: str
    ) -> None:
        self.files[path] = (200, {"Content-Type": content_type, **headers}, body)

    def put_status(self, path: str, status: int, **headers: str) -> None:
        self.files[path] = (status, headers, b"")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/robots.txt":
            return web.Response(text=self.robots, content_type="text/plain")
        if path in self.files:
            status, headers, body = self.files[path]
            return web.Response(status=status, headers=headers, body=body or None)
        if path.startswith("/p/"):
            title = escape(path)
            html = f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{title}</body>"
            return web.Response(text=html, content_type="text/html")
        return web.Response(status=404, text="not found")

    def paths(self) -> list[str]:
        """Every path requested, in order (with repeats)."""
        return [r.path for r in self.log.requests()]


def url_entry(loc: str, *, lastmod: str | None = None, priority: str | None = None) -> str:
    parts = [f"<loc>{loc}</loc>"]
    if lastmod is not None:
        parts.append(f"<lastmod>{lastmod}</lastmod>")
    if priority is not None:
        parts.append(f"<priority>{priority}</priority>")
    return "<url>" + "".join(parts) + "</url>"


def urlset(*entries: str) -> bytes:
    body = "\n".join(entries)
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    return f'{head}<urlset xmlns="{NS}">\n{body}\n</urlset>\n'.encode()


def sitemap_index(*locs: str) -> bytes:
    body = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0"?><sitemapindex xmlns="{NS}">{body}</sitemapindex>'.encode()


def put_gzipped_index(site: SitemapSite, base: str) -> None:
    """An index of two gzipped sitemaps: one a ``.gz`` file sent as ``application/gzip``, the
    other sent with ``Content-Encoding: gzip``; five pages in all, with lastmod and priority."""
    site.put("/sitemap_index.xml", sitemap_index(f"{base}/s1.xml.gz", f"{base}/s2.xml"))
    s1 = urlset(
        url_entry(f"{base}/p/1", lastmod="2024-01-01", priority="1.0"),
        url_entry(f"  {base}/p/2?a=1&amp;b=2  "),
        url_entry(f"<![CDATA[{base}/p/3]]>", priority="0.1"),
    )
    site.put("/s1.xml.gz", gzip.compress(s1), content_type="application/gzip")
    s2 = urlset(
        url_entry(f"{base}/p/4", lastmod="2024-02-02T10:00:00+00:00"),
        url_entry(f"{base}/p/5"),
        url_entry(f"{base}/p/1"),  # listed twice: fetched once
    )
    site.put("/s2.xml", gzip.compress(s2), **{"Content-Encoding": "gzip"})
