"""``crawlq dashboard``: a live web page of a frontier's jobs (see `crawlq.dashboard.app`).

Modules: `history` (what is sampled and kept per job), `render` (the HTML and inline SVG),
`assets` (its stylesheet and script), `lookup` (the search box: the seam for ``crawlq
inspect``), `app` (the aiohttp server), `access` (loopback, the token check, the headers).
"""

from __future__ import annotations

from crawlq.dashboard.app import Dashboard, make_app, serve
from crawlq.dashboard.lookup import Lookup, lookup

__all__ = ["Dashboard", "Lookup", "lookup", "make_app", "serve"]
