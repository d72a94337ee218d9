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

Given ``s3://bucket/prefix`` instead of a directory, the writer writes the same files into a
local spool directory and hands each closed one to an `crawlq.store.warc.uploads.Uploader`
(the upload thread; boto3, ``pip install 'crawlq[s3]'``); ``warc_file`` is then the
object's URL, ``s3://bucket/prefix/<name>``.
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
from typing import TYPE_CHECKING, BinaryIO

from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from crawlq.errors import ConfigError, StoreError
from crawlq.request import FetchResult
from crawlq.secrecy import private_opener
from crawlq.settings.archive import S3Location, default_spool_dir, is_s3_url, parse_s3_url
from crawlq.store.warc.files import (
    OPEN_SUFFIX,
    SUFFIX,
    repair_open_files,
    safe_host,
)
from crawlq.store.warc.records import ORIGINAL_PREFIX, request_record, response_record

if TYPE_CHECKING:
    from crawlq.store.warc.uploads import Uploader

__all__ = ["DEFAULT_MAX_SIZE_BYTES", "WarcLocation", "WarcWriter"]

logger = logging.getLogger("crawlq.store.warc")  # one logger for WARC archiving

DEFAULT_MAX_SIZE_BYTES = 1_000_000_000
"""Size at which a WARC file is closed: 1 GB, the customary size (WARC 1.1 annex C)."""


@dataclass(frozen=True, slots=True)
class WarcLocation:
    """Where a page's response record is.

    Attributes:
        file: The WARC file's final name (no directory; the file is ``<file>.open`` until
            it is closed), or with ``s3://…`` the object's URL, ``s3://bucket/prefix/<name>``
            (the object exists once the file is closed and uploaded).
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

    def __init__(
        self,
        directory: Path,
        max_size_bytes: int,
        software: str,
        *,
        uploader: Uploader | None = None,
    ) -> None:
        self._dir = directory
        self._uploader = uploader
        self._location: S3Location | None = None if uploader is None else uploader.objects.location
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
        spool_dir: str | os.PathLike[str] | None = None,
    ) -> WarcWriter:
        """Prepare to write WARC files into ``directory``; the first file opens on first use.

        Creates the directory when missing and repairs the ``.open`` files that dead
        processes of this host left there (`crawlq.store.warc.files`). For
        ``s3://bucket/prefix``, checks that the bucket can be reached, then does the same in
        the spool directory and queues the closed files dead processes left there for upload.

        Args:
            directory: Where the files go: a directory, or ``s3://bucket/prefix``.
            max_size_bytes: Size in bytes at which a file is closed and the next one begun.
            software: Written to each file's ``warcinfo`` record.
            spool_dir: With ``s3://…``: the local directory the files are written in until
                uploaded (None: `crawlq.settings.archive.default_spool_dir`).

        Returns:
            The writer; close it with `close`.

        Raises:
            ValueError: ``max_size_bytes`` is not positive.
            ConfigError: ``directory`` is a malformed ``s3://`` URL.
            StoreError: The directory cannot be created or read, or the object store
                cannot be reached or has no such bucket; the message names it.
        """
        if max_size_bytes <= 0:
            raise ValueError(f"max_size_bytes must be positive, got {max_size_bytes}")
        uploader: Uploader | None = None
        if is_s3_url(os.fspath(directory)):
            location = parse_s3_url(os.fspath(directory))
            path = Path(spool_dir) if spool_dir is not None else default_spool_dir(location)
            uploader = await asyncio.to_thread(_uploader, location, path)
        else:
            path = Path(directory)
        try:
            path.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(repair_open_files, path)
        except OSError as exc:
            raise StoreError(f"WARC directory {path}: {exc}") from exc
        if uploader is not None:
            uploader.adopt_leftovers()
        return cls(path, max_size_bytes, software, uploader=uploader)

    @property
    def directory(self) -> Path:
        """The directory the files are written in (with ``s3://…``, the spool directory)."""
        return self._dir

    @property
    def uploader(self) -> Uploader | None:
        """What uploads the closed files (``s3://…``), else None."""
        return self._uploader

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
        """Finish the current file (rename it from ``.open``); idempotent.

        With ``s3://…``, then wait for the uploads; files that could not be uploaded stay
        in the spool directory (logged) for the next writer opened on it.
        """
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._finish)
        finally:
            self._executor.shutdown(wait=True)
            if self._uploader is not None:
                await asyncio.to_thread(self._uploader.close)

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
            file = self._name if self._location is None else self._location.url_of(self._name)
            location = WarcLocation(file, offset)
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
        if self._uploader is not None:
            self._uploader.submit(self._name)


def _uploader(location: S3Location, spool: Path) -> Uploader:
    """The uploader of ``location``'s files (boto3 imported here: the ``s3`` extra)."""
    try:
        from crawlq.store.warc.objects import ObjectStore
        from crawlq.store.warc.uploads import Uploader
    except ImportError as exc:
        raise ConfigError(
            "warc_dir", f"WARC archives in S3 need boto3: pip install 'crawlq[s3]' ({exc})"
        ) from None
    return Uploader(ObjectStore.connect(location), spool)
