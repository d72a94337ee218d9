"""Test helpers shipped with crawlq: a loopback HTTP fault server and a static site server.

`make_fault_app` builds an aiohttp application with named fault endpoints (status codes,
delays, dropped connections, truncated bodies, redirects, robots.txt, encodings), in the
manner of Scrapy's mock server. `make_static_app` serves a directory of files. Run either
in-loop with ``aiohttp.test_utils.TestServer`` or in a background thread with
`ServerThread`. `RequestLog` records every request for politeness assertions.
`SyntheticServer` serves a `SyntheticSite` of N pages generated per request (for benchmarks
and large crawls) on one or several loopback hosts.

Everything here binds loopback addresses only.
"""

from __future__ import annotations

from crawlq.testing.fault_server import (
    CHARSET_SAMPLES,
    FAULT_STATE,
    FaultState,
    fault_state,
    make_fault_app,
)
from crawlq.testing.request_log import LoggedRequest, RequestLog
from crawlq.testing.static import generate_site, make_static_app, unpack_corpus
from crawlq.testing.synthetic import SyntheticServer, SyntheticSite
from crawlq.testing.thread import LoopThread, ServerThread

__all__ = [
    "CHARSET_SAMPLES",
    "FAULT_STATE",
    "FaultState",
    "LoggedRequest",
    "LoopThread",
    "RequestLog",
    "ServerThread",
    "SyntheticServer",
    "SyntheticSite",
    "fault_state",
    "generate_site",
    "make_fault_app",
    "make_static_app",
    "unpack_corpus",
]
