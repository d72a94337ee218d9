"""Odd responses through a whole crawl (issue 13, "Responses").

Layered content codings are decoded and parsed; an unknown coding is a dead letter, never a
body taken for decoded; a bare HTTP/1.0 response without ``Content-Type`` is sniffed and
parsed as HTML; binary bytes labelled ``text/html`` are stored with an error, no title and no
links; compression bombs stop at ``max_body_bytes`` with the crawler's memory bounded.
Responses come byte for byte from a raw loopback server (`tests.raw_server`).
"""

from __future__ import annotations

import codecs
import gzip
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import brotli  # type: ignore[import-untyped]
import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.engine.conftest import assert_nothing_lost, crawl
from tests.engine.test_hostile_pages import _PEAK_RSS_LAUNCHER
from tests.raw_server import RawServer, response
from tests.unit.test_codings import zeros_br

HTML = ("Content-Type", "text/html; charset=utf-8")


def after(path: str) -> str:
    """The page that the page at ``path`` links to."""
    return "/after-" + path.strip("/")


def page(title: str, link: str) -> bytes:
    """A page titled ``title`` with one link: following it shows in the server's log."""
    return f'<!DOCTYPE html><title>{title}</title><a href="{link}">next</a>'.encode()


def coded(title: str, link: str, *codings: str) -> bytes:
    body = page(title, link)
    for coding in codings:
        body = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress}[coding](
            body
        )
    return body


BINARY = {
    "/pdf": (b"%PDF-1.4\n", "application/pdf signature"),
    "/png": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image/png signature"),
    "/zip": (b"PK\x03\x04\x14\x00\x00\x00", "application/zip signature"),
    "/controls": (bytes(range(32)) * 2, "54 binary data bytes in the first 132 bytes"),
}
"""Paths serving binary bytes labelled text/html (then markup a parser would find), and the
reason the page record should give."""

ROUTES = {
    "/gzip-gzip": response(
        coded("gzip twice", "/after-gzip-gzip", "gzip", "gzip"),
        [HTML, ("Content-Encoding", "gzip, gzip")],
    ),
    "/deflate-gzip": response(
        coded("deflate then gzip", "/after-deflate-gzip", "deflate", "gzip"),
        [HTML, ("Content-Encoding", "deflate"), ("Content-Encoding", "gzip")],
    ),
    "/br-gzip": response(
        coded("br then gzip", "/after-br-gzip", "br", "gzip"),
        [HTML, ("Content-Encoding", "br, gzip")],
    ),
    "/compress": response(
        page("never decoded", "/after-compress"), [HTML, ("Content-Encoding", "compress")]
    ),
    "/zstd": response(page("never decoded", "/after-zstd"), [HTML, ("Content-Encoding", "zstd")]),
    "/bare": b"HTTP/1.0 200 OK\r\n\r\n" + page("bare", "/after-bare"),
    "/bare-bom": b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\n"
    + codecs.BOM_UTF8
    + b"\n  <html><title>bom</title><a href=/after-bare-bom>x</a>",
    "/bare-text": b"HTTP/1.0 200 OK\r\n\r\nnotes: <title>no</title><a href=/after-bare-text>",
    # not HTML by their label: stored, never scanned for links (QA: JSON was parsed as HTML)
    "/json": response(
        b'{"html": "<a href=\'/after-json\'>x</a>"}', [("Content-Type", "application/json")]
    ),
    "/plain": response(b"notes: <a href=/after-plain>x</a>", [("Content-Type", "text/plain")]),
    "/utf16": response(
        ("\ufeff" + page("wide", "/after-utf16").decode()).encode("utf-16-le"),
        [("Content-Type", "text/html")],
    ),
    **{
        path: response(magic + page("junk", after(path)), [HTML])
        for path, (magic, _) in BINARY.items()
    },
    **{
        f"/after-{name}": response(page(f"after {name}", "/"), [HTML])
        for name in ("gzip-gzip", "deflate-gzip", "br-gzip", "bare", "bare-bom", "utf16")
    },
}


def read_warc(directory: Path, name: str, offset: int) -> tuple[bytes, list[tuple[str, str]]]:
    with open(directory / name, "rb") as fh:
        fh.seek(offset)
        record = next(iter(ArchiveIterator(fh)))
        return record.content_stream().read(), record.http_headers.headers


async def test_odd_responses_are_stored_as_what_they_are(tmp_path: Path) -> None:
    with RawServer(ROUTES) as server:
        base = server.base_url
        seeds = [base + path for path in ROUTES if not path.startswith("/after-")]
        results = await crawl(
            tmp_path / "s.db", seeds, obey_robots=False, warc_dir=str(tmp_path / "warc")
        )
        asked = server.requests()
    pages = {url.removeprefix(base): record for url, record in results.pages.items()}
    dead = {url.removeprefix(base): record for url, record in results.dead.items()}

    # layered codings: decoded in reverse order, parsed, their link followed
    for path, title in [
        ("/gzip-gzip", "gzip twice"),
        ("/deflate-gzip", "deflate then gzip"),
        ("/br-gzip", "br then gzip"),
    ]:
        assert (pages[path].status, pages[path].title, pages[path].error) == (200, title, None)
        assert asked[after(path)] == 1
    # an unknown coding: a dead letter, asked once, its body never parsed as if decoded
    for path in ("/compress", "/zstd"):
        assert path not in pages
        assert dead[path].reason == "unsupported_content_coding"
        assert repr(path.strip("/")) in dead[path].detail
        assert (asked[path], asked[after(path)]) == (1, 0)
    # no Content-Type: HTML by its signature (after a BOM and blank lines too), else not
    for path, title in [("/bare", "bare"), ("/bare-bom", "bom")]:
        record = pages[path]
        assert (record.status, record.content_type, record.title, record.error) == (
            200,
            "",
            title,
            None,
        )
        assert asked[after(path)] == 1
    assert (pages["/bare-text"].title, asked["/after-bare-text"]) == (None, 0)
    # JSON and plain text: stored as they are, their markup-looking text never followed
    for path, kind in [("/json", "application/json"), ("/plain", "text/plain")]:
        record = pages[path]
        assert (record.status, record.content_type, record.title, record.error) == (
            200,
            kind,
            None,
            None,
        )
        assert asked.get("/after-" + path.strip("/"), 0) == 0
    # UTF-16 HTML has NUL bytes and is HTML all the same
    assert (pages["/utf16"].title, pages["/utf16"].error, asked["/after-utf16"]) == (
        "wide",
        None,
        1,
    )
    # binary labelled text/html: stored with the reason, no junk title, no links
    for path, (magic, reason) in BINARY.items():
        record = pages[path]
        assert (record.status, record.content_type) == (200, "text/html")
        assert (record.title, record.error) == (None, f"binary_body: {reason}")
        assert record.size_bytes == len(magic + page("junk", after(path)))
        assert asked[after(path)] == 0

    assert_nothing_lost(
        results,
        [base + p for p in ROUTES if p not in ("/after-compress", "/after-zstd")]
        + [base + "/"],  # the after-pages link back to / (404 here)
    )
    assert all(count == 1 for count in asked.values()), asked

    # WARC: the payload as decoded, the received Content-Encoding lines kept under a new name
    record = pages["/deflate-gzip"]
    assert record.warc_file is not None and record.warc_offset is not None
    payload, headers = read_warc(tmp_path / "warc", record.warc_file, record.warc_offset)
    assert payload == page("deflate then gzip", "/after-deflate-gzip")
    assert [v for n, v in headers if n == "X-Crawlq-Orig-Content-Encoding"] == ["deflate", "gzip"]
    assert ("Content-Length", str(len(payload))) in headers
    assert not any(n.lower() == "content-encoding" for n, _ in headers)


GIB = 1 << 30


def gzip_bomb(decoded_bytes: int, wbits: int = zlib.MAX_WBITS | 16) -> bytes:
    """Zeros compressed a MiB at a time: 1 GiB gives ~1 MB of gzip, never held decoded."""
    obj = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(1 << 20)
    return b"".join([obj.compress(block) for _ in range(decoded_bytes >> 20)]) + obj.flush()


def streamed(body: bytes, headers: list[tuple[str, str]]) -> Iterator[bytes]:
    """The response in 64 KiB writes, so the server stops when the crawler hangs up."""
    head = response(b"", headers).removesuffix(b"\r\n\r\n")
    yield head.replace(b"Content-Length: 0", f"Content-Length: {len(body)}".encode()) + (
        b"\r\n\r\n"
    )
    for start in range(0, len(body), 1 << 16):
        yield body[start : start + (1 << 16)]


@pytest.mark.e2e  # crawlq processes, seconds each: out of the fast lane
def test_compression_bombs_stop_at_the_cap_and_rss_stays_under_150_mb(tmp_path: Path) -> None:
    gzip_body = gzip_bomb(GIB)  # 1 MB -> 1 GB
    assert 900_000 < len(gzip_body) < 1_100_000
    bombs = {
        "/gzip": (gzip_body, "gzip"),
        "/gzip-gzip": (gzip.compress(gzip_body), "gzip, gzip"),  # 2 kB -> 1 GB
        "/br": (zeros_br(GIB >> 20), "br"),  # 2 kB -> 1 GB
        "/deflate": (gzip_bomb(GIB >> 2, zlib.MAX_WBITS), "deflate"),  # 250 kB -> 256 MB
        "/raw-deflate": (gzip_bomb(GIB >> 2, -zlib.MAX_WBITS), "deflate"),
    }
    routes = {
        path: (
            lambda body=body, coding=coding: streamed(body, [HTML, ("Content-Encoding", coding)])
        )
        for path, (body, coding) in bombs.items()
    }
    store = tmp_path / "s.db"
    with RawServer(routes) as server:
        urls = [server.base_url + path for path in bombs]
        # Started from a small launcher process: a child forked straight from this (large)
        # pytest process would count the parent's pages in its peak RSS until its exec.
        out = subprocess.run(
            [sys.executable, "-c", _PEAK_RSS_LAUNCHER, sys.executable, "-m", "crawlq",
             "crawl", *urls, "--store", str(store), "--ignore-robots", "--delay", "0",
             "--host-concurrency", "5", "--max-depth", "0", "-q"],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout.split()  # fmt: skip
        asked = server.requests()
    returncode, peak_kb = int(out[0]), int(out[1])
    assert returncode == 4  # every seed was a bomb: no page stored (README: exit status 4)
    peak_mb = peak_kb / 1024  # kilobytes on Linux
    assert peak_mb < 150, f"peak RSS {peak_mb:.0f} MB"
    print(f"peak RSS {peak_mb:.0f} MB")
    with sqlite3.connect(store) as db:
        dead = dict(db.execute("SELECT url, reason FROM dead_letters").fetchall())
        (pages,) = db.execute("SELECT count(*) FROM pages").fetchone()
    assert dead == dict.fromkeys(urls, "body_too_large")
    assert pages == 0
    assert asked == dict.fromkeys(bombs, 1)  # permanent: never asked again
