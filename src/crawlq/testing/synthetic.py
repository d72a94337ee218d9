"""A website of N pages generated on request, and its server, for benchmarks and large crawls.

`SyntheticSite` is the model: page ``i`` (0 <= i < N) is a pure function of ``(seed, i)`` and
the base URLs of the hosts, so nothing is written to disk and the same seed serves the same
bytes every time. Page 0 is ``/`` on the first host; page ``i > 0`` is
``/s{i // 100}/p{i}.html`` on host ``(i // 100) % H``, and a page has that one URL only (the
other hosts answer 404 for it), so the reachable set is exactly N URLs. Each page:

- is 5,000-60,000 bytes (HTML), skewed towards the small end (median about 18 kB);
- has 20-200 ``<a href>`` links: its tree children ``F*i + 1 .. F*i + F`` (``F`` = 8, so every
  page is reachable from ``/``), random other pages, a few duplicates of those (in another
  form, or with a fragment), and one off-site link (``http://offsite.invalid/``) that a
  crawler must not follow;
- writes each in-site link in one of several forms: relative (``p7.html``, ``../s3/p312.html``,
  ``./p8.html``), root-relative (``/s3/p312.html``), or absolute (``http://127.0.0.2:PORT/…``),
  always absolute when the target lives on another host, so links cross hosts.

`SyntheticServer` serves a `SyntheticSite` over HTTP/1.1 on loopback hosts, one port: a small
asyncio server (keep-alive, pipelining, GET and HEAD; no aiohttp in the request path, so it
stays cheap next to the crawler under test) on one or several loopback addresses
(``127.0.0.1`` … ``127.0.0.H``) sharing one port. Any path that is not a page of that host,
``/robots.txt`` included, answers 404.
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
from collections.abc import Sequence
from functools import partial

from crawlq.errors import ConfigError
from crawlq.testing.thread import LoopThread

__all__ = ["SyntheticServer", "SyntheticSite"]

_SECTION = 100  # pages per /s{k}/ folder
_CHILDREN = 8  # tree children per page: page i links to 8i+1 .. 8i+8
_MIN_BYTES, _MAX_BYTES = 5_000, 60_000
_MIN_LINKS, _MAX_LINKS = 20, 200
_OFFSITE = "http://offsite.invalid/elsewhere.html"
_PATH = re.compile(rb"/s(\d+)/p(\d+)\.html")
_WORDS = (
    "query index table tuple vacuum planner lock page buffer heap btree merge join scan "
    "function trigger schema role grant column row insert update delete select transaction "
    "commit rollback snapshot replica archive checkpoint segment cursor operator aggregate"
)


def _filler(n_bytes: int, seed: int) -> str:
    rng = random.Random(seed)
    vocabulary = _WORDS.split()
    words: list[str] = []
    size = 0
    while size < n_bytes:
        word = rng.choice(vocabulary)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


class SyntheticSite:
    """The pages of a synthetic site: deterministic HTML from ``(seed, page id)``.

    Args:
        n_pages: Number of pages, all reachable from ``/`` (at least 1).
        base_urls: ``http://host:port`` of each host, without a trailing slash (at least one);
            page ``i > 0`` lives on host ``(i // 100) % len(base_urls)``, page 0 on the first.
        seed: Seed of the link pattern, sizes and text.

    Raises:
        ConfigError: ``n_pages`` < 1, or no base URL (the message names the argument).
    """

    def __init__(self, n_pages: int, base_urls: Sequence[str], seed: int = 1) -> None:
        if n_pages < 1:
            raise ConfigError("n_pages", f"must be at least 1, got {n_pages}")
        if not base_urls:
            raise ConfigError("base_urls", "must name at least one host")
        self.n_pages = n_pages
        self.base_urls = tuple(u.rstrip("/") for u in base_urls)
        self.seed = seed
        self._filler = _filler(2 * _MAX_BYTES, seed)

    @property
    def reachable_pages(self) -> int:
        """Number of distinct page URLs reachable from `root_url` (exactly ``n_pages``)."""
        return self.n_pages

    @property
    def root_url(self) -> str:
        """The URL of page 0, where a crawl starts."""
        return self.base_urls[0] + "/"

    def host_of(self, page_id: int) -> int:
        """Index in `base_urls` of the host serving ``page_id``."""
        return (page_id // _SECTION) % len(self.base_urls) if page_id else 0

    def path_of(self, page_id: int) -> str:
        """Path of ``page_id``: ``/`` for page 0, else ``/s{i // 100}/p{i}.html``."""
        return f"/s{page_id // _SECTION}/p{page_id}.html" if page_id else "/"

    def url_of(self, page_id: int) -> str:
        """Absolute URL of ``page_id``."""
        return self.base_urls[self.host_of(page_id)] + self.path_of(page_id)

    def page_at(self, host: int, path: bytes) -> int | None:
        """The page id served at ``path`` on host ``host`` (an index into `base_urls`), if any.

        Args:
            host: Index of the host asked.
            path: Request path (no query string), as bytes.

        Returns:
            The page id, or None when no page lives there (answer 404).
        """
        if path == b"/":
            return 0 if host == 0 else None
        match = _PATH.fullmatch(path)
        if match is None:
            return None
        section, page_id = int(match[1]), int(match[2])
        if not 0 < page_id < self.n_pages or section != page_id // _SECTION:
            return None
        if match[2].startswith(b"0") or self.host_of(page_id) != host:
            return None
        return page_id

    def links_of(self, page_id: int) -> list[int]:
        """Ids of the in-site pages ``page_id`` links to, duplicates included, in page order."""
        return [target for target, _ in self._plan(page_id)[0]]

    def page(self, page_id: int) -> bytes:
        """The HTML of ``page_id``, UTF-8 encoded.

        Raises:
            ConfigError: ``page_id`` is not in ``0 .. n_pages - 1``.
        """
        if not 0 <= page_id < self.n_pages:
            raise ConfigError("page_id", f"must be in 0..{self.n_pages - 1}, got {page_id}")
        links, size, rng = self._plan(page_id)
        here_host, here_path = self.host_of(page_id), self.path_of(page_id)
        items = [
            f'<li><a href="{self._href(t, here_host, here_path, form)}">Page {t}</a></li>'
            for t, form in links
        ]
        items.insert(rng.randrange(len(items) + 1), f'<li><a href="{_OFFSITE}">elsewhere</a></li>')
        head = (
            f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Synthetic page {page_id}'
            f'</title><link rel="stylesheet" href="/style.css"></head><body><h1>Page {page_id}'
            "</h1>"
        )
        cut = len(items) // 2
        nav = "<ul>" + "".join(items[:cut]) + "</ul>"
        more = "<ul>" + "".join(items[cut:]) + "</ul></body></html>"
        text_len = max(0, size - len(head) - len(nav) - len(more) - 14)
        start = rng.randrange(len(self._filler) - text_len) if text_len else 0
        text = self._filler[start : start + text_len]
        half = text_len // 2
        return f"{head}{nav}<p>{text[:half]}</p><p>{text[half:]}</p>{more}".encode()

    def _plan(self, page_id: int) -> tuple[list[tuple[int, int]], int, random.Random]:
        """(target, form) per in-site link, the page's size in bytes, and its RNG for the rest."""
        rng = random.Random(self.seed * 1_000_003 + page_id)
        n_links = _MIN_LINKS + int((_MAX_LINKS - _MIN_LINKS) * rng.random() ** 2)
        size = _MIN_BYTES + int((_MAX_BYTES - _MIN_BYTES) * rng.random() ** 2)
        first = page_id * _CHILDREN + 1
        targets = list(range(first, min(first + _CHILDREN, self.n_pages)))
        n_dups = n_links // 10
        n = self.n_pages
        targets += [rng.randrange(n) for _ in range(n_links - 1 - n_dups - len(targets))]
        targets += [targets[rng.randrange(len(targets))] for _ in range(n_dups)]
        return [(t, rng.randrange(6)) for t in targets], size, rng

    def _href(self, target: int, here_host: int, here_path: str, form: int) -> str:
        path = self.path_of(target)
        there = self.host_of(target)
        if there != here_host or form == 0:
            return self.base_urls[there] + path
        if form == 1 or target == 0:
            return path
        rel = path[1:]
        if here_path != "/":
            here_section = here_path.split("/")[1]
            name = rel.split("/")[1]
            if rel.startswith(here_section + "/"):
                rel = name if form != 2 else "./" + name
            else:
                rel = "../" + rel
        return rel + ("#part" if form == 5 else "")


# -- the server ------------------------------------------------------------------------------------


class _HTTPProtocol(asyncio.Protocol):
    """HTTP/1.1 on one connection: keep-alive, pipelining, GET and HEAD only."""

    def __init__(self, site: SyntheticSite, host: int, counter: list[int]) -> None:
        self._site = site
        self._host = host
        self._counter = counter
        self._buf = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while self._transport is not None:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > 65536:
                    self._reply(b"431 Request Header Fields Too Large", b"", close=True)
                return
            head, self._buf = self._buf[:end], self._buf[end + 4 :]
            self._handle(head)

    def _handle(self, head: bytes) -> None:
        line, _, headers = head.partition(b"\r\n")
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            self._reply(b"400 Bad Request", b"", close=True)
            return
        method, target, version = parts
        lower = headers.lower()
        close = b"connection: close" in lower or (
            version == b"HTTP/1.0" and b"connection: keep-alive" not in lower
        )
        if method not in (b"GET", b"HEAD") or b"content-length:" in lower:
            self._reply(b"405 Method Not Allowed", b"", close=True)
            return
        page_id = self._site.page_at(self._host, target.split(b"?", 1)[0])
        self._counter[0] += 1
        if page_id is None:
            self._reply(b"404 Not Found", b"not found\n", close, b"text/plain", method == b"HEAD")
        else:
            body = self._site.page(page_id)
            self._reply(b"200 OK", body, close, b"text/html; charset=utf-8", method == b"HEAD")

    def _reply(
        self,
        status: bytes,
        body: bytes,
        close: bool,
        content_type: bytes = b"text/plain",
        head_only: bool = False,
    ) -> None:
        transport = self._transport
        if transport is None:
            return
        header = (
            b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type
            + b"\r\nContent-Length: " + str(len(body)).encode()
            + (b"\r\nConnection: close" if close else b"") + b"\r\n\r\n"
        )  # fmt: skip
        transport.write(header if head_only else header + body)
        if close:
            transport.close()
            self._transport = None


class SyntheticServer(LoopThread):
    """Serve a `SyntheticSite` of ``n_pages`` on ``hosts`` loopback addresses, one shared port.

    Host ``k`` (0-based) is ``127.0.0.{k + 1}``; Linux routes all of ``127.0.0.0/8`` to the
    loopback interface, so no set-up is needed. Serves from a background thread with its own
    event loop (`start`/`stop`, or a context manager), or in the caller's loop (`serve`)::

        with SyntheticServer(20_000, hosts=8) as server:
            crawl(server.site.root_url)  # then expect server.site.reachable_pages pages

    ``/robots.txt`` and any path that is not a page of that host answer 404.

    Args:
        n_pages: Pages in the site (at least 1).
        hosts: Number of loopback hosts, 1..254.
        port: TCP port on every host; 0 picks one that is free on all of them.
        seed: Seed of the site (see `SyntheticSite`).

    Raises:
        ConfigError: ``n_pages`` or ``hosts`` out of range (the message names it).
    """

    def __init__(self, n_pages: int, hosts: int = 1, port: int = 0, seed: int = 1) -> None:
        if not 1 <= hosts <= 254:
            raise ConfigError("hosts", f"must be in 1..254, got {hosts}")
        if n_pages < 1:
            raise ConfigError("n_pages", f"must be at least 1, got {n_pages}")
        super().__init__()
        self.n_pages = n_pages
        self.hosts = hosts
        self.seed = seed
        self._requested_port = port
        self._sockets: list[socket.socket] = []
        self._site: SyntheticSite | None = None
        self._counter = [0]

    @property
    def addresses(self) -> list[str]:
        """The loopback addresses served, ``127.0.0.1`` first."""
        return [f"127.0.0.{k + 1}" for k in range(self.hosts)]

    @property
    def site(self) -> SyntheticSite:
        """The site served (its base URLs carry the bound port).

        Raises:
            RuntimeError: The sockets are not bound yet.
        """
        if self._site is None:
            raise RuntimeError("SyntheticServer is not bound; call start() or bind() first")
        return self._site

    @property
    def requests(self) -> int:
        """Requests answered so far (pages and 404s)."""
        return self._counter[0]

    def bind(self, attempts: int = 20) -> None:
        """Bind one listening socket per host on one port and build the site.

        Args:
            attempts: Ports to try when ``port`` is 0 and a picked port is taken on some host.

        Raises:
            OSError: The port (or, with port 0, every port tried) is taken on some host.
        """
        for attempt in range(attempts):
            socks: list[socket.socket] = []
            try:
                port = self._requested_port
                for address in self.addresses:
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    socks.append(sock)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((address, port))
                    sock.listen(1024)
                    sock.setblocking(False)
                    port = sock.getsockname()[1]
            except OSError:
                for sock in socks:
                    sock.close()
                if self._requested_port or attempt == attempts - 1:
                    raise
                continue
            self._sockets = socks
            self._site = SyntheticSite(
                self.n_pages, [f"http://{a}:{port}" for a in self.addresses], self.seed
            )
            return

    async def serve(self, stop: asyncio.Event) -> None:
        """Serve in the running loop until ``stop`` is set (binds first if needed).

        Raises:
            OSError: The sockets cannot be bound (see `bind`).
        """
        if not self._sockets:
            self.bind()
        loop = asyncio.get_running_loop()
        site = self.site
        servers = [
            await loop.create_server(partial(_HTTPProtocol, site, k, self._counter), sock=sock)
            for k, sock in enumerate(self._sockets)
        ]
        try:
            await stop.wait()
        finally:
            for server in servers:
                server.close()
                await server.wait_closed()
            self._sockets = []

    _thread_name = "crawlq-synthetic"

    def start(self, timeout_s: float = 10.0) -> None:
        """Bind, then serve from a background thread; returns once serving.

        Args:
            timeout_s: Seconds to wait for the server thread to come up.

        Raises:
            RuntimeError: Already started, or the thread did not come up in time.
            OSError: The sockets cannot be bound (see `bind`).
        """
        if self._thread is None:
            self.bind()
        super().start(timeout_s)

    async def _serve(self, stop: asyncio.Event) -> None:
        asyncio.get_running_loop().call_soon(self._ready.set)
        await self.serve(stop)
