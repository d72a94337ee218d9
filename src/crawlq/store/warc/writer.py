"""WARC archiving: the request and response of every fetched page, as WARC 1.1 records.

warcio (``pip install 'crawlq[warc]'``) is imported only by this package
(`crawlq.store.warc` maps its files). One `WarcWriter` per worker process writes, for each
page it fetches, a ``response`` record and then a ``request`` record (``WARC-Concurrent-To``
the response), each its own gzip member, as the WARC 1.1 standard (ISO 28500:2017, annex D)
and warcio's ``WARCWriter`` do. Each file opens with a ``warcinfo`` record naming crawlq and
the host.

Files rotate: a file is closed when it reaches ``max_size_bytes`` (it may exceed it by one
exchange) and when the writer closes. Each exchange is flushed to the operating system before
`WarcWriter.write` returns, and the store only records a page after that, so every
``(warc_file, warc_offset)`` in the store names a complete record.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from crawlq.errors import StoreError
from crawlq.request import FetchResult
from crawlq.secrecy import private_opener
from crawlq.store.warc.files import (
    OPEN_SUFFIX,
    SUFFIX,
    repair_open_files,
    safe_host,
)
from crawlq.store.warc.records import ORIGINAL_PREFIX, request_record, response_record

__all__ = ["DEFAULT_MAX_SIZE_BYTES", "WarcLocation", "WarcWriter"]

logger = logging.getLogger("crawlq.store.warc")  # one logger for WARC archiving

DEFAULT_MAX_SIZE_BYTES = 1_000_000_000
"""Size at which a WARC file is closed: 1 GB, the customary size (WARC 1.1 annex C)."""


@dataclass(frozen=True, slots=True)
class WarcLocation:
    """Where a page's response record is.

    Attributes:
        file: The WARC file's final name (no directory; the file is ``<file>.open`` until
            it is closed).
        offset: Byte offset of the record's gzip member in the file.
    """

    file: str
    offset: int


class WarcWriter:
    """Writes fetched pages to rotating gzip WARC 1.1 files in one directory.

    Build with `WarcWriter.open`; one per worker process. Calls may come concurrently from
    one event loop: they are written one after the other on a thread of the writer's own, so
    compression never blocks the loop.
    """

    def __init__(self, directory: Path, max_size_bytes: int, software: str) -> None:
        self._dir = directory
        self._max_size_bytes = max_size_bytes
        self._software = software
        self._host = safe_host(socket.gethostname())
        self._pid = os.getpid()
        self._serial = 0
        self._builder = WARCWriter(None, gzip=True, warc_version="1.1")
        self._fh: BinaryIO | None = None
        self._name = ""
        self._closed = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crawlq-warc")
        self.files_closed: list[str] = []
        """Names of the files this writer has finished, in order."""

    @classmethod
    async def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        max_size_bytes: int = DEFAULT_MAX_SIZE_BYTES,
        software: str = "crawlq",
    ) -> WarcWriter:
        """Prepare to write WARC files into ``directory``; the first file opens on first use.

        Creates the directory when missing and repairs the ``.open`` files that dead
        processes of this host left there (`crawlq.store.warc.files`).

        Args:
            directory: Where the files go.
            max_size_bytes: Size in bytes at which a file is closed and the next one begun.
            software: Written to each file's ``warcinfo`` record.

        Returns:
            The writer; close it with `close`.

        Raises:
            ValueError: ``max_size_bytes`` is not positive.
            StoreError: The directory cannot be created or read; the message names it.
        """
        if max_size_bytes <= 0:
            raise ValueError(f"max_size_bytes must be positive, got {max_size_bytes}")
        path = Path(directory)
        try:
            path.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(repair_open_files, path)
        except OSError as exc:
            raise StoreError(f"WARC directory {path}: {exc}") from exc
        return cls(path, max_size_bytes, software)

    @property
    def directory(self) -> Path:
        """The directory the files go to."""
        return self._dir

    async def write(self, result: FetchResult, *, fetched_at: float) -> WarcLocation:
        """Archive one fetched page: its response record, then its request record.

        Args:
            result: The fetch; ``result.exchange`` supplies the head as received (when it is
                None, a head is rebuilt from ``result.headers``).
            fetched_at: When the response was received, Unix seconds (``WARC-Date``).

        Returns:
            Where the response record is.

        Raises:
            StoreError: The file cannot be written (disk full …) or the writer is closed;
                the message names the file.
        """
        if self._closed:
            raise StoreError(f"WARC writer for {self._dir} is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._write, result, fetched_at)

    async def close(self) -> None:
        """Finish the current file (rename it from ``.open``); idempotent."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._finish)
        finally:
            self._executor.shutdown(wait=True)

    # Everything below runs on the writer's thread.

    def _write(self, result: FetchResult, fetched_at: float) -> WarcLocation:
        try:
            fh = self._fh or self._start()
            offset = fh.tell()
            moment = datetime.fromtimestamp(fetched_at, UTC).replace(tzinfo=None)
            date = datetime_to_iso_date(moment, use_micros=True)
            response = response_record(self._builder, result, date)
            request = request_record(self._builder, result, date)
            self._builder.write_request_response_pair(request, response)
            location = WarcLocation(self._name, offset)
            if fh.tell() >= self._max_size_bytes:
                self._finish()
        except OSError as exc:
            raise StoreError(f"cannot write WARC file {self._dir / self._name}: {exc}") from exc
        return location

    def _start(self) -> BinaryIO:
        while True:
            self._serial += 1
            stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
            name = f"crawlq-{stamp}-{self._host}-{self._pid}-{self._serial:05d}{SUFFIX}"
            try:
                fh = open(self._dir / (name + OPEN_SUFFIX), "xb", opener=private_opener)  # noqa: SIM115
            except FileExistsError:  # pragma: no cover - same microsecond and pid
                continue
            break
        self._fh, self._name = fh, name
        self._builder.out = fh
        info = {
            "software": self._software,
            "hostname": socket.gethostname(),
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
            "description": (
                "response payloads are recorded after transfer and content decoding; the "
                f"original Content-Encoding, Transfer-Encoding and Content-Length are kept as "
                f"{ORIGINAL_PREFIX}* headers"
            ),
        }
        self._builder.write_record(self._builder.create_warcinfo_record(name, info))
        logger.info("writing WARC file %s", self._dir / (name + OPEN_SUFFIX))
        return fh

    def _finish(self) -> None:
        fh, self._fh = self._fh, None
        if fh is None:
            return
        fh.close()
        os.replace(self._dir / (self._name + OPEN_SUFFIX), self._dir / self._name)
        self.files_closed.append(self._name)
        logger.info("closed WARC file %s", self._dir / self._name)
