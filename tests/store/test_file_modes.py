"""Issue 12.12 (and 23.8c, export files): the files crawlq creates are its owner's only (0600).

SQLite stores and frontiers (with their ``-wal``, ``-shm`` and ``.lock`` files) can hold page
bodies (``--store-body``), WARC files always do and export files (``crawlq export -o``,
``crawlq crawl -o/-O``, every format) hold what the store holds, so under the usual umask
022 they must not come out world-readable (0644), and a stricter umask still wins.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.fetch import Fetcher
from crawlq.frontier import HostPolicy
from crawlq.frontier.sqlite import SqliteFrontier
from crawlq.records import PageRecord
from crawlq.request import CrawlRequest
from crawlq.store import ResultBatch
from crawlq.store.sqlite import SqliteStore
from crawlq.testing import ServerThread, make_fault_app
from crawlq.web.addresses import AddressGuard


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(make_fault_app()) as running:
        yield running


async def test_sqlite_store_and_frontier_files_are_0600_under_umask_022(
    tmp_path: Path, umask_022: None
) -> None:
    path = tmp_path / "crawl.db"
    frontier = await SqliteFrontier.open(path, default_policy=HostPolicy(0, 1))
    store = await SqliteStore.open(path)
    try:
        await frontier.push([CrawlRequest("http://h.test/")])
        body = b"<html>private</html>"
        page = PageRecord(b"\1" * 20, "http://h.test/", "http://h.test/", 200, "text/html", 0,
                          "t", time.time(), len(body), 0.1, 1, None, "default", body)  # fmt: skip
        await store.write(ResultBatch(pages=[page]))
        names = ["crawl.db", "crawl.db-wal", "crawl.db-shm", "crawl.db.lock"]
        assert {n: oct(mode(tmp_path / n)) for n in names} == {n: "0o600" for n in names}
    finally:
        await store.close()
        await frontier.close()

    # a store of its own (PostgreSQL's frontier elsewhere), and a stricter umask
    os.umask(0o077)
    alone = await SqliteStore.open(tmp_path / "alone.db")
    await alone.close()
    assert oct(mode(tmp_path / "alone.db")) == "0o600"


async def test_warc_files_are_0600_under_umask_022(
    server: ServerThread, tmp_path: Path, umask_022: None
) -> None:
    pytest.importorskip("warcio")
    from crawlq.store.warc import WarcWriter

    guard = AddressGuard.of(allow_private=True)  # the test server is on loopback
    async with Fetcher(
        user_agent="crawlq-test", record_exchanges=True, address_guard=guard
    ) as fetcher:
        result = await fetcher.fetch(server.base_url + "/page/1")
    writer = await WarcWriter.open(tmp_path / "warc")
    try:
        await writer.write(result, fetched_at=time.time())
        (open_file,) = (tmp_path / "warc").iterdir()
        assert oct(mode(open_file)) == "0o600"  # while written (….warc.gz.open)
    finally:
        await writer.close()
    (closed,) = (tmp_path / "warc").iterdir()
    assert closed.name.endswith(".warc.gz") and oct(mode(closed)) == "0o600"


def test_a_crawl_under_umask_022_leaves_no_readable_file(
    server: ServerThread, tmp_path: Path
) -> None:
    pytest.importorskip("warcio")
    store, warc = tmp_path / "crawl.db", tmp_path / "warc"
    done = subprocess.run(
        [sys.executable, "-m", "crawlq", "crawl", f"{server.base_url}/page/1", "--store",
         str(store), "--max-pages", "3", "--delay", "0", "--store-body", "--warc", str(warc),
         "-q"],
        capture_output=True, text=True, timeout=120, check=False, umask=0o022,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    created = [store, Path(f"{store}.lock"), *warc.iterdir()]
    assert len(created) >= 3
    assert {p.name: oct(mode(p)) for p in created} == {p.name: "0o600" for p in created}


def _crawlq_022(*args: str) -> None:
    """``crawlq ARGS`` under umask 022; it must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "crawlq", *args],
        capture_output=True, text=True, timeout=120, check=False, umask=0o022,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.e2e  # crawlq processes, seconds each: out of the fast lane
@pytest.mark.parametrize(
    ("flag", "name"),
    [("-O", "x.jsonl"), ("-O", "x.json"), ("-o", "x.csv"), ("-O", "x.parquet")],
)
def test_crawl_output_files_are_0600_under_umask_022(
    server: ServerThread, tmp_path: Path, flag: str, name: str
) -> None:
    out = tmp_path / name
    _crawlq_022("crawl", f"{server.base_url}/page/1", "--store", str(tmp_path / "crawl.db"),
                "--max-pages", "3", "--delay", "0", "--output-what", "pages", flag, str(out),
                "-q")  # fmt: skip
    assert out.stat().st_size > 0
    assert oct(mode(out)) == "0o600"  # as the store beside it, not 0644


@pytest.mark.e2e  # crawlq processes, seconds each: out of the fast lane
def test_export_files_are_0600_under_umask_022_and_existing_ones_keep_their_mode(
    server: ServerThread, tmp_path: Path
) -> None:
    store = tmp_path / "crawl.db"
    _crawlq_022("crawl", f"{server.base_url}/page/1", "--store", str(store), "--max-pages", "3",
                "--delay", "0", "-q")  # fmt: skip
    for name in ["p.jsonl", "p.json", "p.csv", "p.parquet"]:
        out = tmp_path / name
        _crawlq_022("export", "--store", str(store), "--what", "pages", "-o", str(out))
        assert out.stat().st_size > 0 and oct(mode(out)) == "0o600", name
        out.chmod(0o644)  # a file that exists is the owner's choice: replaced, mode kept
        _crawlq_022("export", "--store", str(store), "--what", "pages", "-o", str(out))
        assert oct(mode(out)) == "0o644", name
