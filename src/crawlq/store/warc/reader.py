"""Reading a response record back from a WARC file, for ``crawlq reparse``.

`read_response` returns the response record a page row points to (``warc_file``,
``warc_offset``) as crawlq wrote it (`crawlq.store.warc.records`): status, headers and decoded
payload. The file name comes from the store, which other processes write: only a plain file
name inside the given directory is read, never a path.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from crawlq.errors import StoreError
from crawlq.store.warc.files import OPEN_SUFFIX

__all__ = ["ArchivedResponse", "read_response"]

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
    folder = Path(directory)
    path = folder / file
    if not path.is_file() and (folder / (file + OPEN_SUFFIX)).is_file():
        path = folder / (file + OPEN_SUFFIX)
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
