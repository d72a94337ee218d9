"""WARC archiving: the request and response of every fetched page, as WARC 1.1 records.

The only module that imports warcio (``pip install 'crawlq[warc]'``). One `WarcWriter` per
worker process writes, for each page it fetches, a ``response`` record and then a ``request``
record (``WARC-Concurrent-To`` the response), each its own gzip member, as the WARC 1.1
standard (ISO 28500:2017, annex D) and warcio's ``WARCWriter`` do. Each file opens with a
``warcinfo`` record naming crawlq and the host.

What a response record holds. The status line and the headers are the ones received, in
their order and spelling. The payload is the body after transfer and content decoding
(aiohttp de-chunks and `crawlq.codings` decompresses while reading, every layer of
``Content-Encoding``; the coded bytes are not kept). So that
the record stays self-consistent and every WARC reader can parse it, a response that came
with ``Content-Encoding`` or ``Transfer-Encoding`` has those headers and ``Content-Length``
renamed to ``X-Crawlq-Orig-Content-Encoding`` (and so on) and a ``Content-Length`` of the
decoded payload added. Responses without either header are recorded exactly as received.
Redirect hops that were followed are not archived; the record is the response that was
stored as the page, under its final URL.

Files. Names are ``crawlq-<UTC time>-<host>-<pid>-<serial>.warc.gz``, so workers on different
machines, and processes on one machine, never pick the same name; a file is written as
``<name>.open`` and renamed to ``<name>`` when it is closed: when it reaches
``max_size_bytes`` (it may exceed it by one exchange) and when the writer closes. Every file
is created new (never appended to), with mode ``0600`` (owner only; a stricter umask wins):
archives hold page bodies. Each exchange is flushed to the operating system before
`WarcWriter.write` returns, and the store only records a page after that, so every
``(warc_file, warc_offset)`` in the store names a complete record.

Reading back. `read_response` returns the response record a page row points to
(``warc_file``, ``warc_offset``) as crawlq wrote it: status, headers and decoded payload, for
``crawlq reparse``. The file name comes from the store, which other processes write: only a
plain file name inside the given directory is read, never a path.

After a crash (``kill -9``) a ``.open`` file remains, possibly ending in a partial record
(always one that no stored page points to). The next writer opened on the same directory on
the same host repairs the ``.open`` files of processes of this host that are gone: it cuts
each after its last complete record and renames it to its final name. Files of other hosts
are left alone.
"""

from __future__ import annotations

import asyncio
import http
import io
import logging
import os
import re
import socket
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from crawlq.errors import StoreError
from crawlq.request import FetchResult, RawExchange
from crawlq.secrecy import PRIVATE_MODE

__all__ = [
    "DEFAULT_MAX_SIZE_BYTES",
    "ArchivedResponse",
    "WarcLocation",
    "WarcWriter",
    "read_response",
    "repair_open_files",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_SIZE_BYTES = 1_000_000_000
"""Size at which a WARC file is closed: 1 GB, the customary size (WARC 1.1 annex C)."""

_SUFFIX = ".warc.gz"
_OPEN = ".open"
_NAME_RE = re.compile(r"^crawlq-\d{20}-(?P<host>.+)-(?P<pid>\d+)-\d{5}\.warc\.gz\.open$")
_DECODED_HEADERS = frozenset({"content-encoding", "transfer-encoding"})
_ORIGINAL_PREFIX = "X-Crawlq-Orig-"
_READ_BYTES = 1 << 20
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\.warc\.gz")
"""A WARC file name `read_response` accepts: no directory part, no leading dot."""


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


@dataclass(frozen=True, slots=True)
class ArchivedResponse:
    """A response record read back (`read_response`).

    Attributes:
        url: Its ``WARC-Target-URI`` (the page's final URL).
        status: The HTTP status.
        headers: The response headers as recorded, in order (see the module docstring for the
            ``X-Crawlq-Orig-*`` names of the ones that described the wire encoding).
        body: The payload: the body after transfer and content decoding.
    """

    url: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def read_response(
    directory: str | os.PathLike[str], file: str, offset: int, *, max_body_bytes: int
) -> ArchivedResponse:
    """Read the response record at ``offset`` of WARC file ``file`` in ``directory``.

    Blocking (file I/O and decompression): call it in a thread from async code. The file is
    looked for as ``file`` and, while its writer still has it open, ``file.open``.

    Args:
        directory: The WARC directory (the reader's own; the store holds names only).
        file: The file name as a page row holds it: a plain name ending ``.warc.gz``.
        offset: Byte offset of the record's gzip member.
        max_body_bytes: Largest payload read; a larger one is an error.

    Returns:
        The record's URL, status, headers and payload.

    Raises:
        StoreError: ``file`` is not a plain WARC file name, the file is missing or
            unreadable, or no response record starts at ``offset``; the message names them.
    """
    if not _PLAIN_NAME.fullmatch(file) or offset < 0:
        raise StoreError(f"not a WARC file name and offset: {file!r:.100} at {offset}")
    folder = Path(directory)
    path = folder / file
    if not path.is_file() and (folder / (file + _OPEN)).is_file():
        path = folder / (file + _OPEN)
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            record = next(iter(ArchiveIterator(fh)), None)
            if record is None or record.rec_type != "response" or record.http_headers is None:
                kind = "nothing" if record is None else f"a {record.rec_type} record"
                raise StoreError(f"WARC file {path}: {kind} at offset {offset}, not a response")
            body = record.raw_stream.read(max_body_bytes + 1)
            if len(body) > max_body_bytes:
                raise StoreError(
                    f"WARC file {path}: the response at offset {offset} is over "
                    f"{max_body_bytes} bytes (max_body_bytes)"
                )
            http = record.http_headers
            status = int(http.get_statuscode() or 0)
            url = str(record.rec_headers.get_header("WARC-Target-URI") or "")
            return ArchivedResponse(url, status, tuple(http.headers), body)
    except (OSError, ArchiveLoadFailed, ValueError, zlib.error) as exc:
        raise StoreError(f"cannot read WARC file {path} at offset {offset}: {exc}") from exc


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
        self._host = _safe_host(socket.gethostname())
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
        processes of this host left there (see the module docstring).

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
            response = self._response(result, date)
            request = self._request(result, date)
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
            name = f"crawlq-{stamp}-{self._host}-{self._pid}-{self._serial:05d}{_SUFFIX}"
            try:
                fh = open(self._dir / (name + _OPEN), "xb", opener=_private)  # noqa: SIM115
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
                f"{_ORIGINAL_PREFIX}* headers"
            ),
        }
        self._builder.write_record(self._builder.create_warcinfo_record(name, info))
        logger.info("writing WARC file %s", self._dir / (name + _OPEN))
        return fh

    def _finish(self) -> None:
        fh, self._fh = self._fh, None
        if fh is None:
            return
        fh.close()
        os.replace(self._dir / (self._name + _OPEN), self._dir / self._name)
        self.files_closed.append(self._name)
        logger.info("closed WARC file %s", self._dir / self._name)

    def _response(self, result: FetchResult, date: str) -> Any:
        exchange = result.exchange or _rebuilt(result)
        headers = _archived_headers(exchange.response_headers, len(result.body))
        status = f"{result.status} {exchange.reason}".rstrip()
        http_headers = StatusAndHeaders(status, headers, protocol=f"HTTP/{exchange.http_version}")
        return self._builder.create_warc_record(
            result.final_url,
            "response",
            payload=io.BytesIO(result.body),
            length=len(result.body),
            http_headers=http_headers,
            warc_headers_dict={"WARC-Date": date},
        )

    def _request(self, result: FetchResult, date: str) -> Any:
        exchange = result.exchange or _rebuilt(result)
        parts = urlsplit(result.final_url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        line = f"{exchange.method} {target} HTTP/{exchange.http_version}"
        http_headers = StatusAndHeaders(line, list(exchange.request_headers), is_http_request=True)
        return self._builder.create_warc_record(
            result.final_url,
            "request",
            payload=io.BytesIO(exchange.request_body),
            length=len(exchange.request_body),
            http_headers=http_headers,
            warc_headers_dict={"WARC-Date": date},
        )


def _archived_headers(
    received: tuple[tuple[str, str], ...], payload_bytes: int
) -> list[tuple[str, str]]:
    """The response headers to record with a decoded payload (see the module docstring)."""
    if not any(name.lower() in _DECODED_HEADERS for name, _ in received):
        return list(received)
    out: list[tuple[str, str]] = []
    for name, value in received:
        if name.lower() in _DECODED_HEADERS or name.lower() == "content-length":
            out.append((_ORIGINAL_PREFIX + name, value))
        else:
            out.append((name, value))
    out.append(("Content-Length", str(payload_bytes)))
    return out


def _rebuilt(result: FetchResult) -> RawExchange:
    """A head for a result that carries no `RawExchange` (a custom fetcher)."""
    try:
        reason = http.HTTPStatus(result.status).phrase
    except ValueError:
        reason = ""
    return RawExchange(
        method="GET",
        request_headers=(("Host", urlsplit(result.final_url).netloc),),
        request_body=b"",
        http_version="1.1",
        reason=reason,
        response_headers=tuple(result.headers.items()),
    )


def _safe_host(hostname: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", hostname) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _private(path: str, flags: int) -> int:
    """`open`'s opener for a new WARC file: mode ``0600``, less by the umask."""
    return os.open(path, flags, PRIVATE_MODE)


def repair_open_files(directory: str | os.PathLike[str]) -> list[str]:
    """Close the ``.open`` WARC files that dead crawlq processes of this host left behind.

    Each is cut after its last complete gzip member (record) and renamed to its final name.
    Files of live processes and of other hosts are not touched.

    Args:
        directory: The WARC directory.

    Returns:
        The final names of the files repaired.

    Raises:
        OSError: A file cannot be read, cut or renamed.
    """
    path = Path(directory)
    host = _safe_host(socket.gethostname())
    repaired: list[str] = []
    for entry in sorted(path.glob(f"crawlq-*{_SUFFIX}{_OPEN}")):
        match = _NAME_RE.match(entry.name)
        if match is None or match["host"] != host:
            continue
        pid = int(match["pid"])
        if pid == os.getpid() or _alive(pid):
            continue
        final = entry.name[: -len(_OPEN)]
        try:
            size = entry.stat().st_size
            keep = _complete_prefix_bytes(entry)
            if keep < size:
                with open(entry, "r+b") as fh:
                    fh.truncate(keep)
            os.replace(entry, path / final)
        except FileNotFoundError:  # another worker starting on this host repaired it first
            continue
        logger.warning(
            "repaired WARC file %s left by dead process %d: kept %d of %d bytes",
            path / final,
            pid,
            keep,
            size,
        )
        repaired.append(final)
    return repaired


def _complete_prefix_bytes(path: Path) -> int:
    """Length of the longest prefix of ``path`` made of complete gzip members."""
    complete = 0
    position = 0  # bytes fed to decompressors so far
    decomp = zlib.decompressobj(zlib.MAX_WBITS | 16)
    with open(path, "rb") as fh:
        pending = b""
        while True:
            data = pending or fh.read(_READ_BYTES)
            pending = b""
            if not data:
                return complete
            try:
                decomp.decompress(data)
            except zlib.error:
                return complete
            position += len(data)
            if decomp.eof:
                leftover = decomp.unused_data
                position -= len(leftover)
                complete = position
                pending = leftover
                decomp = zlib.decompressobj(zlib.MAX_WBITS | 16)
