"""The WARC writer: records that warcio itself validates, offsets, rotation, crash repair."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.fetch import Fetcher
from crawlq.request import FetchResult
from crawlq.testing import ServerThread, make_fault_app
from crawlq.web.addresses import AddressGuard

warcio = pytest.importorskip("warcio")

from warcio.archiveiterator import ArchiveIterator  # noqa: E402

from crawlq.store.warc import WarcWriter  # noqa: E402
from crawlq.store.warc.files import repair_open_files  # noqa: E402

WARCIO = shutil.which("warcio", path=os.path.dirname(sys.executable)) or shutil.which("warcio")
PATHS = ["/gzip", "/deflate", "/brotli", "/big-chunked/5000", "/status/404", "/html?x=1&y=%C3%A9"]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(make_fault_app()) as running:
        yield running


def warcio_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert WARCIO is not None, "the warcio command is not installed"
    return subprocess.run(
        [WARCIO, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def index(files: list[Path]) -> list[dict[str, str]]:
    """Every record of ``files`` as ``warcio index`` lists it, with the file's name added."""
    rows = []
    for path in files:
        done = warcio_cli("index", "-f", "warc-type,warc-target-uri,offset", path)
        assert done.returncode == 0, done.stderr
        rows += [{**json.loads(line), "file": path.name} for line in done.stdout.splitlines()]
    return rows


def read_record(path: Path, offset: int) -> tuple[str, str, bytes, list[tuple[str, str]]]:
    """Type, target URI, payload and HTTP headers of the record at ``offset``."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        record = next(iter(ArchiveIterator(fh)))
        uri = record.rec_headers.get_header("WARC-Target-URI")
        return record.rec_type, uri, record.content_stream().read(), record.http_headers.headers


async def fetch_all(base: str, paths: list[str]) -> list[FetchResult]:
    async with Fetcher(
        user_agent="crawlq-test",
        record_exchanges=True,
        address_guard=AddressGuard(allow_private=True),  # a loopback server
    ) as fetcher:
        return [await fetcher.fetch(base + path) for path in paths]


async def test_each_fetch_is_one_response_and_one_request_record_that_warcio_checks(
    server: ServerThread, tmp_path: Path
) -> None:
    results = await fetch_all(server.base_url, PATHS)
    writer = await WarcWriter.open(tmp_path / "warc")
    locations = [await writer.write(r, fetched_at=time.time()) for r in results]
    assert not writer.files_closed
    await writer.close()
    await writer.close()  # idempotent

    files = sorted((tmp_path / "warc").iterdir())
    assert [f.name for f in files] == writer.files_closed == [locations[0].file]
    assert files[0].name.startswith("crawlq-") and files[0].name.endswith(".warc.gz")
    assert f"-{os.getpid()}-00001." in files[0].name
    check = warcio_cli("check", "-v", *files)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("digest pass") == 1 + 2 * len(PATHS)

    records = index(files)
    assert [r["warc-type"] for r in records] == ["warcinfo"] + ["response", "request"] * len(PATHS)
    responses = [(r["file"], int(r["offset"])) for r in records if r["warc-type"] == "response"]
    assert responses == [(loc.file, loc.offset) for loc in locations]

    for result, loc in zip(results, locations, strict=True):
        kind, uri, payload, headers = read_record(files[0], loc.offset)
        assert (kind, uri, payload) == ("response", result.final_url, result.body)
        names = {name.lower(): value for name, value in headers}
        assert names["content-type"] == result.headers["content-type"]
        if "content-encoding" in result.headers or "transfer-encoding" in result.headers:
            assert names["content-length"] == str(len(result.body))  # the decoded payload
        assert ("content-encoding" in names, "transfer-encoding" in names) == (False, False)

    by_path = dict(zip(PATHS, locations, strict=True))
    _, _, _, gzip_headers = read_record(files[0], by_path["/gzip"].offset)
    assert ("X-Crawlq-Orig-Content-Encoding", "gzip") in gzip_headers
    _, _, _, chunked_headers = read_record(files[0], by_path["/big-chunked/5000"].offset)
    assert ("X-Crawlq-Orig-Transfer-Encoding", "chunked") in chunked_headers
    _, _, _, plain_headers = read_record(files[0], by_path["/status/404"].offset)
    assert not any(name.startswith("X-Crawlq-Orig-") for name, _ in plain_headers)


async def test_files_rotate_at_the_size_limit_and_never_share_a_name(
    server: ServerThread, tmp_path: Path
) -> None:
    results = await fetch_all(server.base_url, ["/big/20000", *PATHS] * 3)
    writer = await WarcWriter.open(tmp_path, max_size_bytes=4000)
    locations = await asyncio.gather(*(writer.write(r, fetched_at=1.8e9) for r in results))
    await writer.close()

    files = sorted(tmp_path.iterdir())
    assert len(files) >= 4
    assert [f.name for f in files] == sorted(writer.files_closed)
    assert len(set(writer.files_closed)) == len(files)
    assert not list(tmp_path.glob("*.open"))
    assert warcio_cli("check", *files).returncode == 0
    records = index(files)
    responses = [(r["file"], int(r["offset"])) for r in records if r["warc-type"] == "response"]
    assert sorted(responses) == sorted((loc.file, loc.offset) for loc in locations)
    assert len(responses) == len(results)
    for path in files:  # each file opens with its warcinfo; only its last exchange may overflow
        kinds = [r["warc-type"] for r in records if r["file"] == path.name]
        assert kinds[0] == "warcinfo" and kinds.count("warcinfo") == 1
        if path.name != writer.files_closed[-1]:
            last_response = max(o for f, o in responses if f == path.name)
            assert last_response < 4000 <= path.stat().st_size


def test_a_killed_writers_file_is_cut_after_its_last_record_and_closed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from crawlq.request import FetchResult
        from crawlq.store.warc import WarcWriter

        async def main():
            writer = await WarcWriter.open(sys.argv[1])
            for n in range(5):
                body = (b"<p>page %d</p>" % n) * 200
                result = FetchResult(f"http://e.test/{n}", f"http://e.test/{n}", 200,
                                     {"content-type": "text/html"}, body, None, "", 0.1)
                await writer.write(result, fetched_at=1.8e9 + n)
            print("written", flush=True)
            await asyncio.sleep(60)

        asyncio.run(main())
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "written\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    [left] = list(tmp_path.glob("*.warc.gz.open"))
    whole = left.read_bytes()
    left.write_bytes(whole[:-25])  # the last record (a request) was being written
    host = socket.gethostname()
    others = [  # another host's file, and one of a live process (ours): left alone
        tmp_path / f"crawlq-20260101000000000000-other-host-{proc.pid}-00001.warc.gz.open",
        tmp_path / f"crawlq-20260101000000000000-{host}-{os.getpid()}-00001.warc.gz.open",
    ]
    for path in others:
        path.write_bytes(b"partial")

    assert repair_open_files(tmp_path) == [left.name.removesuffix(".open")]
    repaired = tmp_path / left.name.removesuffix(".open")
    assert sorted(tmp_path.glob("*.open")) == sorted(others)
    assert warcio_cli("check", repaired).returncode == 0
    kinds = [r["warc-type"] for r in index([repaired])]
    assert kinds == ["warcinfo"] + ["response", "request"] * 4 + ["response"]
    assert whole.startswith(repaired.read_bytes())


async def test_a_new_writer_never_appends_to_an_existing_file(tmp_path: Path) -> None:
    result = FetchResult("http://e.test/", "http://e.test/", 200, {}, b"x", None, "", 0.1)
    first = await WarcWriter.open(tmp_path)
    a = await first.write(result, fetched_at=1.8e9)
    await first.close()
    before = (tmp_path / a.file).read_bytes()
    second = await WarcWriter.open(tmp_path)
    b = await second.write(result, fetched_at=1.8e9)
    await second.close()
    assert a.file != b.file and (tmp_path / a.file).read_bytes() == before
    kinds = [r["warc-type"] for r in index([tmp_path / b.file])]
    assert kinds == ["warcinfo", "response", "request"]  # a file of its own, from the start


async def test_a_closed_writer_refuses_and_a_bad_size_is_an_error(tmp_path: Path) -> None:
    from crawlq.errors import StoreError

    with pytest.raises(ValueError, match="max_size_bytes"):
        await WarcWriter.open(tmp_path, max_size_bytes=0)
    writer = await WarcWriter.open(tmp_path)
    await writer.close()
    result = FetchResult("http://e.test/", "http://e.test/", 200, {}, b"x", None, "", 0.1)
    with pytest.raises(StoreError, match="closed"):
        await writer.write(result, fetched_at=1.8e9)
    assert list(tmp_path.iterdir()) == []  # nothing was written, not even an empty file
