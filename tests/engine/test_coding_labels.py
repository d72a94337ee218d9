"""Coding labels that mean no coding, and stray NULs, through a whole crawl (issue 23).

A ``text/html`` page sent with ``Content-Encoding: none``, ``identity``, an empty value or a
charset name (``UTF-8``) is stored with its 200, its title and its links followed, and its
WARC record holds the body as received; ``x-unknown`` is still a dead letter naming the
label. A page with a NUL in its first KiB keeps its title and links; PNG bytes labelled
``text/html`` are still ``binary_body``. Responses come byte for byte from `tests.raw_server`.
"""

from __future__ import annotations

import gzip
import logging
import struct
import zlib
from pathlib import Path

import pytest

from tests.engine.conftest import assert_nothing_lost, crawl
from tests.engine.test_responses import HTML, after, page, read_warc
from tests.raw_server import RawServer, response


def png(width: int, height: int) -> bytes:
    """A valid RGB PNG of a grey gradient (PNG spec §5: signature, IHDR, IDAT, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes([x % 256, x % 256, x % 256]) * width for x in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


LABELS = {"/none": "none", "/identity": "identity", "/empty": "", "/utf-8": "UTF-8"}
"""Paths sending a page with a ``Content-Encoding`` that means no coding, and that label."""

STRAY_NUL = (
    b"<!DOCTYPE html><html><head>\x00<title>stray NUL</title></head>"
    b'<body><p>a\x00b</p><a href="/after-stray-nul">next</a></body></html>'
)
"""A page with NULs in its first KiB: in the head, in text."""

PNG = png(16, 16)

ROUTES = {
    **{
        path: response(page(f"label {path}", after(path)), [HTML, ("Content-Encoding", label)])
        for path, label in LABELS.items()
    },
    "/none-gzip": response(
        gzip.compress(page("none then gzip", "/after-none-gzip")),
        [HTML, ("Content-Encoding", "none, gzip")],
    ),
    "/x-unknown": response(
        page("never decoded", "/after-x-unknown"), [HTML, ("Content-Encoding", "x-unknown")]
    ),
    "/stray-nul": response(STRAY_NUL, [HTML]),
    "/png": response(PNG + page("junk", "/after-png"), [("Content-Type", "text/html")]),
    **{
        after(path): response(page(f"after {path}", "/"), [HTML])
        for path in [*LABELS, "/none-gzip", "/stray-nul"]
    },
}
"""Raw responses; ``/after-…`` are the pages linked from the page at ``…``."""

PAGES = {
    **{path: f"label {path}" for path in LABELS},
    "/none-gzip": "none then gzip",
    "/stray-nul": "stray NUL",
}
"""Paths stored as HTML pages, and their titles."""

SEEDS = [*PAGES, "/x-unknown", "/png"]


async def test_labels_that_mean_no_coding_and_stray_nuls_keep_the_page(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="crawlq.fetch.exchange")
    with RawServer(ROUTES) as server:
        base = server.base_url
        results = await crawl(
            tmp_path / "s.db",
            [base + path for path in SEEDS],
            obey_robots=False,
            warc_dir=str(tmp_path / "warc"),
        )
        asked = server.requests()
    pages = {url.removeprefix(base): record for url, record in results.pages.items()}
    dead = {url.removeprefix(base): record for url, record in results.dead.items()}

    for path, title in PAGES.items():
        record = pages[path]
        assert (record.status, record.title, record.error) == (200, title, None), path
        assert asked[after(path)] == 1, path
        assert pages[after(path)].title == f"after {path}"
    # a coding that is neither supported nor harmless: a dead letter naming it
    assert "/x-unknown" not in pages
    assert dead["/x-unknown"].reason == "unsupported_content_coding"
    assert "'x-unknown'" in dead["/x-unknown"].detail
    assert asked["/after-x-unknown"] == 0
    # real PNG bytes labelled text/html: still binary, no title, no links
    assert (pages["/png"].title, pages["/png"].error) == (None, "binary_body: image/png signature")
    assert asked["/after-png"] == 0
    assert_nothing_lost(
        results,
        [base + path for path in SEEDS]
        + [base + after(path) for path in PAGES]
        + [base + "/"],  # the after-pages link back to / (404 here)
    )
    assert all(count == 1 for count in asked.values()), asked

    # a debug line names the label taken as no coding
    lines = [r.getMessage() for r in caplog.records if "taken as no coding" in r.getMessage()]
    assert f"{base}/none: Content-Encoding none taken as no coding" in lines
    assert f"{base}/utf-8: Content-Encoding utf-8 taken as no coding" in lines

    # WARC: the payload is the body as received, the label kept under the original's name
    for path, payload_sent, label in [
        ("/none", page("label /none", "/after-none"), "none"),
        ("/utf-8", page("label /utf-8", "/after-utf-8"), "UTF-8"),
        ("/stray-nul", STRAY_NUL, None),
    ]:
        record = pages[path]
        assert record.warc_file is not None and record.warc_offset is not None
        payload, headers = read_warc(tmp_path / "warc", record.warc_file, record.warc_offset)
        assert payload == payload_sent
        assert ("Content-Length", str(len(payload))) in headers
        assert not any(n.lower() == "content-encoding" for n, _ in headers)
        originals = [v for n, v in headers if n == "X-Crawlq-Orig-Content-Encoding"]
        assert originals == ([] if label is None else [label])
