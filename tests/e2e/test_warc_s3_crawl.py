"""``crawlq crawl --warc s3://bucket/prefix`` end to end, against a real local S3 server (moto).

A crawl of a loopback site uploads its WARC files (every stored page's response record in
an object, at the page's offset, exactly once); a crawl killed with SIGKILL leaves its open
file in the spool, and the crawl started again uploads it with the rest (nothing lost);
``export --body --warc`` reads the bodies back from the objects; bad input is one message.
"""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from crawlq.testing.request_log import RequestLog
from crawlq.testing.static import generate_site, make_static_app, slow_pages
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.s3_server import SECRET_KEY, MotoServer
from tests.services import free_port

pytest.importorskip("boto3")
warcio = pytest.importorskip("warcio")

from warcio.archiveiterator import ArchiveIterator  # noqa: E402

pytestmark = pytest.mark.e2e


def stored_pages(db: Path) -> list[tuple[str, str, int]]:
    """(final URL, warc_file, warc_offset) of every stored page."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        rows = conn.execute("SELECT final_url, warc_file, warc_offset FROM pages").fetchall()
    return [(str(u), str(f), int(o)) for u, f, o in rows]


def responses(client, bucket: str, prefix: str) -> dict[tuple[str, int], str]:
    """(object URL, offset) -> target URI of every response record of every object."""
    out: dict[tuple[str, int], str] = {}
    listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
    for obj in listing.get("Contents", ()):
        data = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        records = ArchiveIterator(io.BytesIO(data))
        for record in records:
            if record.rec_type == "response":
                uri = record.rec_headers.get_header("WARC-Target-URI")
                out[(f"s3://{bucket}/{obj['Key']}", records.get_record_offset())] = uri
    return out


def test_a_crawl_uploads_every_page_once_and_export_reads_bodies_back(
    s3_bucket: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=30)
    spool, db = tmp_path / "spool", tmp_path / "c.db"
    env = {"CRAWLQ_WARC_SPOOL_DIR": str(spool)}
    with ServerThread(make_static_app(root)) as server:
        run_crawlq(
            "crawl", server.base_url + "/index.html", "--store", str(db), "--delay", "0",
            "--warc", f"s3://{s3_bucket}/crawls/a", "--warc-max-size", "8KB", "-q", env=env,
        )  # fmt: skip
        base = server.base_url
    pages = stored_pages(db)
    assert len(pages) >= 30
    records = responses(moto_server.client(), s3_bucket, "crawls/a")
    assert len({file for file, _ in records}) >= 3  # rotated: several objects
    for url, file, offset in pages:  # each stored page's record, where its row points
        assert records[(file, offset)] == url
    uris = Counter(records.values())
    assert sorted(uris) == sorted(url for url, _, _ in pages)
    assert max(uris.values()) == 1  # every record once: nothing uploaded twice
    assert list(spool.iterdir()) == []  # removed once uploaded

    exported = run_crawlq(
        "export", "--store", str(db), "--body", "--warc", f"s3://{s3_bucket}/crawls/a", env=env
    )
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(rows) == len(pages)
    for row in rows:
        path = row["final_url"].removeprefix(base + "/")
        assert base64.b64decode(row["body_b64"]) == (root / path).read_bytes(), path
    no_warc = run_crawlq("export", "--store", str(db), "--body")
    assert all(json.loads(line)["body_b64"] is None for line in no_warc.stdout.splitlines())

    reparsed = run_crawlq("reparse", "--store", str(db), "--warc", f"s3://{s3_bucket}/crawls/a")
    n = sum(1 for _ in pages)
    assert reparsed.stdout.splitlines()[0].startswith(f"reparsed {n} of {n} pages"), reparsed


PAGE_S = 0.2


def _count_pages(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM pages").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet, or busy
        return 0


@pytest.mark.timeout(240)
def test_a_killed_crawls_file_is_uploaded_when_it_starts_again(
    s3_bucket: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=30)
    spool, db = tmp_path / "spool", tmp_path / "c.db"
    env = {"CRAWLQ_WARC_SPOOL_DIR": str(spool)}
    log = RequestLog()
    app = make_static_app(root, log=log)
    app.middlewares.append(slow_pages(PAGE_S))
    client = moto_server.client()
    with ServerThread(app) as server:
        args = [
            "crawl", server.base_url + "/index.html", "--store", str(db), "--delay", "0",
            "--warc", f"s3://{s3_bucket}/k", "-q",
        ]  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "crawlq", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, **env},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while _count_pages(db) < 5:  # pages stored, pointing into the open file
                assert proc.poll() is None, "the crawl ended before it could be killed"
                assert time.monotonic() < deadline, "the crawl stored nothing"
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        killed = stored_pages(db)
        [left] = list(spool.glob("*.warc.gz.open"))  # never closed, so never uploaded
        assert client.list_objects_v2(Bucket=s3_bucket).get("KeyCount", 0) == 0

        again = run_crawlq(*args[:-1], "-v", env=env)  # the worker started again
    assert "left in" in again.stderr and left.name.removesuffix(".open") in again.stderr
    pages = stored_pages(db)
    assert len(pages) >= 30 and set(killed) <= set(pages)
    records = responses(client, s3_bucket, "k")
    assert left.name.removesuffix(".open") in {file.rpartition("/")[2] for file, _ in records}
    for url, file, offset in pages:  # the killed run's pages too: nothing lost
        assert records[(file, offset)] == url
    assert list(spool.iterdir()) == []
    # A page the killed run archived but had not stored yet is fetched again: its URL may be
    # in two records (the old one pointed to by no row), never more.
    assert max(Counter(records.values()).values()) <= 2


def test_bad_warc_urls_and_stores_are_one_message(
    s3_bucket: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    db = str(tmp_path / "c.db")
    crawl = ("crawl", "http://127.0.0.1:9/", "--store", db, "--ignore-robots")
    bad = run_crawlq(*crawl, "--warc", "s3://", check=False)
    assert bad.returncode == 2 and "'s3://' names no bucket" in bad.stderr
    creds = run_crawlq(*crawl, "--warc", "s3://AKIAZZ:hunter2@bucket/x", check=False)
    assert creds.returncode == 2 and "credentials do not go in the URL" in creds.stderr
    assert "hunter2" not in creds.stderr and "AKIAZZ" not in creds.stderr

    missing = run_crawlq(*crawl, "--warc", "s3://no-such-crawlq-bucket/x", check=False)
    assert missing.returncode == 1
    [line] = missing.stderr.splitlines()
    assert "'no-such-crawlq-bucket'" in line and "no such bucket" in line
    assert moto_server.endpoint in line

    closed = f"http://127.0.0.1:{free_port()}"
    down = run_crawlq(
        *crawl, "--warc", f"s3://{s3_bucket}/x", check=False, env={"AWS_ENDPOINT_URL": closed}
    )
    assert down.returncode == 1
    [line] = down.stderr.splitlines()
    assert closed in line and "cannot connect" in line
    export = run_crawlq("export", "--store", db, "--body", "--warc", "s3://x:1/y", check=False)
    assert export.returncode == 2 and "not a host and port" in export.stderr
    for proc in (bad, creds, missing, down, export):
        assert SECRET_KEY not in proc.stderr + proc.stdout
