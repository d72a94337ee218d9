"""Reading a page's response record back from a WARC file (`read_response`, for reparse)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.errors import StoreError
from crawlq.fetch import Fetcher
from crawlq.request import FetchResult
from crawlq.store.warc import WarcWriter
from crawlq.store.warc.reader import read_response
from crawlq.testing import ServerThread, make_fault_app
from crawlq.web.addresses import AddressGuard

MB = 10**6


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(make_fault_app()) as running:
        yield running


async def fetch_all(base: str, paths: list[str]) -> list[FetchResult]:
    async with Fetcher(
        user_agent="crawlq-test",
        record_exchanges=True,
        address_guard=AddressGuard(allow_private=True),
    ) as fetcher:
        return [await fetcher.fetch(base + path, follow_redirects=False) for path in paths]


async def test_a_record_reads_back_as_fetched_decoded_body_included(
    tmp_path: Path, server: ServerThread
) -> None:
    results = await fetch_all(server.base_url, ["/gzip", "/charset/header/cp1251", "/status/404"])
    writer = await WarcWriter.open(tmp_path)
    locations = [await writer.write(r, fetched_at=1.8e9) for r in results]
    first = locations[0]
    while_open = read_response(tmp_path, first.file, first.offset, max_body_bytes=MB)
    assert not (tmp_path / first.file).exists()  # read from ``<name>.open``
    await writer.close()
    assert while_open.body == results[0].body
    for result, location in zip(results, locations, strict=True):
        record = read_response(tmp_path, location.file, location.offset, max_body_bytes=MB)
        assert (record.url, record.status, record.body) == (
            result.final_url,
            result.status,
            result.body,
        )
        headers = {name.lower(): value for name, value in record.headers}
        assert headers["content-type"] == result.headers["content-type"]  # charset kept
    gzip_headers = dict(
        read_response(tmp_path, first.file, first.offset, max_body_bytes=MB).headers
    )
    assert "Content-Encoding" not in gzip_headers  # renamed: the payload is decoded
    assert gzip_headers["X-Crawlq-Orig-Content-Encoding"] == "gzip"


@pytest.mark.parametrize(
    "name", ["../secret.warc.gz", "/etc/passwd", "a/b.warc.gz", ".x.warc.gz", "x.txt", ""]
)
def test_only_plain_warc_file_names_are_read(tmp_path: Path, name: str) -> None:
    with pytest.raises(StoreError, match="not a WARC file name"):
        read_response(tmp_path, name, 0, max_body_bytes=100)


async def test_a_missing_file_a_wrong_offset_or_a_big_body_is_an_error(
    tmp_path: Path, server: ServerThread
) -> None:
    with pytest.raises(StoreError, match="cannot read WARC file"):
        read_response(tmp_path, "crawlq-none.warc.gz", 0, max_body_bytes=100)
    [result] = await fetch_all(server.base_url, ["/big/5000"])
    writer = await WarcWriter.open(tmp_path)
    location = await writer.write(result, fetched_at=1.8e9)
    await writer.close()
    with pytest.raises(StoreError, match="over 4999 bytes"):
        read_response(tmp_path, location.file, location.offset, max_body_bytes=4999)
    assert len(read_response(tmp_path, location.file, location.offset, max_body_bytes=5000).body)
    with pytest.raises(StoreError, match="a warcinfo record at offset 0, not a response"):
        read_response(tmp_path, location.file, 0, max_body_bytes=MB)
    with pytest.raises(StoreError):  # the middle of a gzip member
        read_response(tmp_path, location.file, location.offset + 3, max_body_bytes=MB)
