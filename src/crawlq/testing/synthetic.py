"""A synthetic website of N pages generated on request, for benchmarks and large-crawl tests.

`SyntheticSite` (`crawlq.testing.synthetic_site`) is the model: each page a pure function of
a seed and its number, its links and sizes described there. `SyntheticServer`
(`crawlq.testing.synthetic_server`) serves a site from a small asyncio HTTP/1.1 server on one
or several loopback addresses (``127.0.0.1`` … ``127.0.0.H``) sharing one port. Both are
re-exported here.
"""

from __future__ import annotations

from crawlq.testing.synthetic_server import SyntheticServer
from crawlq.testing.synthetic_site import SyntheticSite

__all__ = ["SyntheticServer", "SyntheticSite"]
