"""``crawlq dashboard``: a live web page of a frontier's jobs (see `crawlq.dashboard.app`).

Modules: `history` (what is sampled and kept per job), `render` (the HTML and inline SVG,
its stylesheet and script), `lookup` (the search box: ``crawlq inspect``'s story of a URL in
the job), `app` (the aiohttp server, and who may see it: loopback, the token check, the
headers). Every panel is the job's own, also in a store that several jobs share.
"""

from __future__ import annotations

from crawlq.dashboard.app import Dashboard, make_app, serve
from crawlq.dashboard.lookup import Lookup, lookup

__all__ = ["Dashboard", "Lookup", "lookup", "make_app", "serve"]
