"""Reading a response record back from a WARC file, for ``crawlq reparse`` and ``export --body``.

`read_response` returns the response record a page row points to (``warc_file``,
``warc_offset``) as crawlq wrote it (`crawlq.store.warc.records`): status, headers and decoded
payload. The file name comes from the store, which other processes write: only a plain file
name inside the given directory is read, never a path.

`WarcArchive` reads from where the reader says the archive is, a directory or
``s3://bucket/prefix`` (the ``s3`` extra): the object's record is read with one ranged GET
from its offset on, or from the reader's spool directory while the file waits there for its
upload. A row's ``s3://…`` URL only chooses the file name, never a bucket: one under another
location than the reader's is an error.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from crawlq.errors import ConfigError, StoreError
from crawlq.settings.archive import S3Location, default_spool_dir, is_s3_url, parse_s3_url
from crawlq.store.warc.files import OPEN_SUFFIX

__all__ = ["ArchivedResponse", "WarcArchive", "read_response"]

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\.warc\.gz")
"""A WARC file name `read_response` accepts: no directory part, no leading dot."""


@dataclass(frozen=True, slots=True)
class ArchivedResponse:
    """A response record read back (`read_response`).

    Attributes:
        url: Its ``WARC-Target-URI`` (the page's final URL).
        status: The HTTP status.
        headers: The response headers as recorded, in order (see `crawlq.store.warc.records` for
            the ``X-Crawlq-Orig-*`` names of the ones that described the wire encoding).
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
    path = _local_file(Path(directory), file)
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return _response_here(fh, str(path), offset, max_body_bytes)
    except OSError as exc:
        raise StoreError(f"cannot read WARC file {path} at offset {offset}: {exc}") from exc


def _local_file(folder: Path, file: str) -> Path:
    """``folder/file``, or ``folder/file.open`` while its writer still has it open."""
    path = folder / file
    if not path.is_file() and (folder / (file + OPEN_SUFFIX)).is_file():
        path = folder / (file + OPEN_SUFFIX)
    return path


def _response_here(fh: BinaryIO, where: str, offset: int, max_body_bytes: int) -> ArchivedResponse:
    """The response record that starts where ``fh`` stands (``where``: for messages)."""
    try:
        record = next(iter(ArchiveIterator(fh)), None)
        if record is None or record.rec_type != "response" or record.http_headers is None:
            kind = "nothing" if record is None else f"a {record.rec_type} record"
            raise StoreError(f"WARC file {where}: {kind} at offset {offset}, not a response")
        body = record.raw_stream.read(max_body_bytes + 1)
        if len(body) > max_body_bytes:
            raise StoreError(
                f"WARC file {where}: the response at offset {offset} is over "
                f"{max_body_bytes} bytes (max_body_bytes)"
            )
        http = record.http_headers
        status = int(http.get_statuscode() or 0)
        url = str(record.rec_headers.get_header("WARC-Target-URI") or "")
        return ArchivedResponse(url, status, tuple(http.headers), body)
    except (OSError, ArchiveLoadFailed, ValueError, zlib.error) as exc:
        raise StoreError(f"cannot read WARC file {where} at offset {offset}: {exc}") from exc


class WarcArchive:
    """Response records read back from a WARC archive: a directory or ``s3://bucket/prefix``.

    Build with `WarcArchive.open`. `read` blocks (file or network I/O, decompression): call
    it in a thread from async code. Thread-safe.
    """

    def __init__(self, directory: Path | None, location: S3Location | None, objects: object):
        self._dir = directory
        self._location = location
        self._objects = objects

    @classmethod
    def open(cls, archive: str, *, spool_dir: str | os.PathLike[str] | None = None) -> WarcArchive:
        """The archive ``archive`` names; for ``s3://…``, the bucket is checked (blocking).

        Args:
            archive: A directory, or ``s3://bucket/prefix`` as the crawl's ``--warc`` gave it.
            spool_dir: With ``s3://…``: the spool directory, read first for files not
                uploaded yet (None: `crawlq.settings.archive.default_spool_dir`).

        Raises:
            ConfigError: A malformed ``s3://`` URL, or boto3 is missing (the ``s3`` extra).
            StoreError: The object store cannot be reached or has no such bucket.
        """
        if not is_s3_url(archive):
            return cls(Path(archive), None, None)
        location = parse_s3_url(archive, setting="--warc")
        try:
            from crawlq.store.warc.objects import ObjectStore
        except ImportError as exc:
            raise ConfigError(
                "--warc", f"WARC archives in S3 need boto3: pip install 'crawlq[s3]' ({exc})"
            ) from None
        spool = Path(spool_dir) if spool_dir is not None else default_spool_dir(location)
        return cls(spool, location, ObjectStore.connect(location))

    def read(self, file: str, offset: int, *, max_body_bytes: int) -> ArchivedResponse:
        """The response record at ``offset`` of ``file``, a page row's ``warc_file``.

        ``file`` is a plain file name, or an ``s3://bucket/prefix/<name>`` URL: the name is
        read from this archive (a directory holding downloaded files reads the name; an
        ``s3://`` archive must be the URL's bucket and prefix).

        Raises:
            StoreError: Not a WARC file name, a URL under another location, the file or
                object missing or unreadable, or no response record at ``offset``.
        """
        name = self._name_of(file)
        if self._location is None:
            assert self._dir is not None
            return read_response(self._dir, name, offset, max_body_bytes=max_body_bytes)
        if self._dir is not None and _local_file(self._dir, name).is_file():
            return read_response(self._dir, name, offset, max_body_bytes=max_body_bytes)
        from crawlq.store.warc.objects import ObjectStore

        assert isinstance(self._objects, ObjectStore)
        stream = self._objects.open_at(name, offset)
        try:
            return _response_here(stream, self._location.url_of(name), offset, max_body_bytes)
        finally:
            stream.close()

    def _name_of(self, file: str) -> str:
        """The plain file name that ``file`` (a row's ``warc_file``) names (`read`)."""
        name = file
        if is_s3_url(file):
            head, _, name = file.rpartition("/")
            if self._location is not None and head != self._location.url_of("").rstrip("/"):
                raise StoreError(
                    f"the page's WARC record is in {file!r:.300}, not under "
                    f"{self._location.url}: give that location as --warc"
                )
        if not _PLAIN_NAME.fullmatch(name):
            raise StoreError(f"not a WARC file name: {file!r:.300}")
        return name
