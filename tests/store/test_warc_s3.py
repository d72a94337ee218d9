"""WARC files in object storage (``--warc s3://bucket/prefix``), against a real local S3 server.

The server is moto's server mode (`tests.s3_server`), a subprocess on a loopback port. What is
checked: every closed file is uploaded once and removed from the spool only after; records
read back from the objects with warcio and through `WarcArchive` (ranged GETs); a writer
killed with SIGKILL leaves its file, which the next writer repairs and uploads; a failed
upload keeps the file; multipart uploads; and what bad input says.
"""

from __future__ import annotations

import asyncio
import io
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crawlq.errors import ConfigError, StoreError
from crawlq.request import FetchResult
from crawlq.settings.archive import S3Location, parse_s3_url
from tests.s3_server import SECRET_KEY, MotoServer

pytest.importorskip("warcio")
pytest.importorskip("boto3")

from warcio.archiveiterator import ArchiveIterator

from crawlq.store.warc import WarcWriter
from crawlq.store.warc.objects import ObjectStore
from crawlq.store.warc.reader import WarcArchive


def page(n: int, size: int = 300) -> FetchResult:
    body = (b"<p>page %d</p>" % n) * (size // 12)
    url = f"http://e.test/{n}"
    return FetchResult(url, url, 200, {"content-type": "text/html"}, body, None, "", 0.1)


def object_records(client, bucket: str, key: str) -> list[tuple[str, str | None, int]]:
    """(type, target URI, offset) of every record of the object, read with warcio."""
    data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    out = []
    records = ArchiveIterator(io.BytesIO(data))
    for record in records:
        uri = record.rec_headers.get_header("WARC-Target-URI")
        out.append((record.rec_type, uri, records.get_record_offset()))
    return out


def keys(client, bucket: str) -> list[str]:
    listing = client.list_objects_v2(Bucket=bucket)
    return sorted(obj["Key"] for obj in listing.get("Contents", ()))


async def test_closed_files_are_uploaded_once_and_read_back_by_ranged_get(
    s3_bucket: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    writer = await WarcWriter.open(
        f"s3://{s3_bucket}/crawls/one/", max_size_bytes=3000, spool_dir=spool
    )
    results = [page(n) for n in range(12)]
    locations = [await writer.write(r, fetched_at=1.8e9 + i) for i, r in enumerate(results)]
    await writer.close()

    client = moto_server.client()
    assert len(writer.files_closed) >= 3  # rotated
    assert keys(client, s3_bucket) == sorted(f"crawls/one/{n}" for n in writer.files_closed)
    assert list(spool.iterdir()) == []  # every file removed, after its upload
    prefix = f"s3://{s3_bucket}/crawls/one/"
    assert all(loc.file.startswith(prefix) for loc in locations)

    responses = []
    for name in writer.files_closed:
        records = object_records(client, s3_bucket, f"crawls/one/{name}")
        assert records[0][0] == "warcinfo"
        responses += [(prefix + name, off, uri) for kind, uri, off in records if kind == "response"]
    pairs = zip(locations, results, strict=True)
    expected = [(loc.file, loc.offset, r.final_url) for loc, r in pairs]
    assert sorted(responses) == sorted(expected)  # each page's record, exactly once

    archive = await asyncio.to_thread(WarcArchive.open, f"s3://{s3_bucket}/crawls/one")
    for loc, result in zip(locations, results, strict=True):
        back = await asyncio.to_thread(archive.read, loc.file, loc.offset, max_body_bytes=10**6)
        assert (back.url, back.status, back.body) == (result.final_url, 200, result.body)
    with pytest.raises(StoreError, match="not under"):
        archive.read(f"s3://{s3_bucket}/other/{writer.files_closed[0]}", 0, max_body_bytes=99)


def test_a_killed_writers_file_is_repaired_and_uploaded_by_the_next_writer(
    s3_bucket: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    script = textwrap.dedent(
        """
        import asyncio, sys
        from crawlq.request import FetchResult
        from crawlq.store.warc import WarcWriter

        async def main():
            writer = await WarcWriter.open(sys.argv[1], spool_dir=sys.argv[2])
            for n in range(5):
                body = (b"<p>page %d</p>" % n) * 200
                result = FetchResult(f"http://e.test/{n}", f"http://e.test/{n}", 200,
                                     {"content-type": "text/html"}, body, None, "", 0.1)
                loc = await writer.write(result, fetched_at=1.8e9 + n)
                print(loc.file, loc.offset, flush=True)
            print("written", flush=True)
            await asyncio.sleep(60)

        asyncio.run(main())
        """
    )
    url = f"s3://{s3_bucket}/p"
    proc = subprocess.Popen(
        [sys.executable, "-c", script, url, str(spool)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(6)]
        assert lines[-1] == "written\n"
    finally:
        proc.send_signal(signal.SIGKILL)  # the file is open: never closed, never uploaded
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    client = moto_server.client()
    assert keys(client, s3_bucket) == []
    [left] = list(spool.glob("*.warc.gz.open"))
    written = [line.split() for line in lines[:-1]]

    async def restart() -> WarcWriter:
        writer = await WarcWriter.open(url, spool_dir=spool)
        await writer.close()
        return writer

    writer = asyncio.run(restart())
    name = left.name.removesuffix(".open")
    assert writer.uploader is not None and writer.uploader.uploaded == [name]
    assert keys(client, s3_bucket) == [f"p/{name}"]
    assert list(spool.iterdir()) == []
    records = object_records(client, s3_bucket, f"p/{name}")
    responses = [(f"{url}/{name}", str(off)) for kind, _, off in records if kind == "response"]
    assert responses == [(file, off) for file, off in written]  # all five, once each


async def test_a_failed_upload_keeps_the_file_and_it_is_still_readable(
    s3_bucket: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    writer = await WarcWriter.open(f"s3://{s3_bucket}", spool_dir=spool)
    location = await writer.write(page(1), fetched_at=1.8e9)
    moto_server.client().delete_bucket(Bucket=s3_bucket)  # the store refuses every upload now
    try:
        await writer.close()
        assert writer.uploader is not None
        assert writer.uploader.pending == writer.files_closed  # kept, for the next start
        assert [p.name for p in spool.iterdir()] == writer.files_closed
        archive = WarcArchive(spool, S3Location(s3_bucket, ""), None)  # reads the spool first
        back = archive.read(location.file, location.offset, max_body_bytes=10**6)
        assert back.body == page(1).body
    finally:
        moto_server.client().create_bucket(Bucket=s3_bucket)


def test_big_files_go_up_in_parts(s3_bucket: str, moto_server: MotoServer, tmp_path: Path) -> None:
    five_mib = 5 * 1024 * 1024
    location = S3Location(s3_bucket, "big")
    objects = ObjectStore.connect(
        location, multipart_threshold_bytes=five_mib, multipart_chunk_bytes=five_mib
    )
    path = tmp_path / "crawlq-big.warc.gz"
    data = bytes(range(256)) * (11 * 1024 * 1024 // 256)  # 11 MiB: three parts
    path.write_bytes(data)
    assert objects.upload(path, path.name) == f"s3://{s3_bucket}/big/{path.name}"
    head = moto_server.client().head_object(Bucket=s3_bucket, Key=f"big/{path.name}")
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-3")  # a multipart object's ETag counts its parts
    stream = objects.open_at(path.name, 5 * 1024 * 1024 + 7)
    assert stream.read(10) == data[5 * 1024 * 1024 + 7 :][:10]
    stream.close()
    assert objects.names() == [path.name]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("s3://", "names no bucket"),
        ("s3:///prefix", "names no bucket"),
        ("s3://Bad_Bucket/x", "not a valid bucket name"),
        ("s3://ab/x", "not a valid bucket name"),
        ("s3://bucket:9000/x", "not a host and port"),
        ("s3://bucket/a//b", "empty"),
        ("s3://bucket/a/../b", "'..'"),
        ("s3://bucket/x?y=1", "no query"),
        ("s3://AKIAXX:topsecret@bucket/x", "credentials do not go in the URL"),
    ],
)
def test_a_malformed_url_is_one_message_naming_it(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_s3_url(url)
    message = str(info.value)
    assert message.startswith("warc_dir: ") and says in message
    assert "topsecret" not in message and "AKIAXX" not in message


def test_well_formed_urls_are_written_one_way() -> None:
    assert parse_s3_url("s3://my-bucket/a/b/") == S3Location("my-bucket", "a/b")
    assert parse_s3_url("s3://my.bucket") == S3Location("my.bucket", "")
    assert S3Location("b", "").url_of("f.warc.gz") == "s3://b/f.warc.gz"
    assert S3Location("b", "x/y").url == "s3://b/x/y"


def test_a_missing_bucket_or_an_unreachable_endpoint_is_named(
    s3_bucket: str, moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(StoreError) as info:
        ObjectStore.connect(S3Location("no-such-bucket-here", ""))
    assert "'no-such-bucket-here'" in str(info.value) and "no such bucket" in str(info.value)
    assert moto_server.endpoint in str(info.value)

    from tests.services import free_port

    closed = f"http://user:pw-in-url@127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", closed)
    with pytest.raises(StoreError) as info:
        ObjectStore.connect(S3Location(s3_bucket, ""))
    message = str(info.value)
    assert "cannot connect" in message and "127.0.0.1" in message
    assert "pw-in-url" not in message and SECRET_KEY not in message

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.endpoint)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(StoreError, match="no S3 credentials"):
        ObjectStore.connect(S3Location(s3_bucket, ""))
