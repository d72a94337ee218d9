"""WARC file names, and the repair of files a killed process left open.

Names are ``crawlq-<UTC time>-<host>-<pid>-<serial>.warc.gz``, so workers on different
machines, and processes on one machine, never pick the same name; a file is written as
``<name>.open`` and renamed to ``<name>`` when it is closed. Every file is created new (never
appended to), with mode ``0600`` (owner only; a stricter umask wins): archives hold page
bodies.

After a crash (``kill -9``) a ``.open`` file remains, possibly ending in a partial record
(always one that no stored page points to). The next writer opened on the same directory on
the same host repairs the ``.open`` files of processes of this host that are gone
(`repair_open_files`): it cuts each after its last complete record (gzip member) and renames
it to its final name. Files of other hosts are left alone. In a spool directory
(``--warc s3://…``), the closed files of such processes are then uploaded
(`closed_files_of_dead_processes`).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import zlib
from pathlib import Path

__all__ = [
    "OPEN_SUFFIX",
    "SUFFIX",
    "closed_files_of_dead_processes",
    "repair_open_files",
    "safe_host",
]

logger = logging.getLogger("crawlq.store.warc")  # one logger for WARC archiving

SUFFIX = ".warc.gz"
"""Ending of a finished WARC file's name."""
OPEN_SUFFIX = ".open"
"""Added to the name while the file is being written."""
_NAME_RE = re.compile(r"^crawlq-\d{20}-(?P<host>.+)-(?P<pid>\d+)-\d{5}\.warc\.gz(?:\.open)?$")
_READ_BYTES = 1 << 20


def safe_host(hostname: str) -> str:
    """``hostname`` as it may stand in a file name."""
    return re.sub(r"[^A-Za-z0-9.]+", "_", hostname) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    repaired: list[str] = []
    for entry in sorted(path.glob(f"crawlq-*{SUFFIX}{OPEN_SUFFIX}")):
        pid = _dead_writer(entry.name)
        if pid is None:
            continue
        final = entry.name[: -len(OPEN_SUFFIX)]
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


def closed_files_of_dead_processes(directory: str | os.PathLike[str]) -> list[str]:
    """Names of the closed WARC files in ``directory`` whose writer, on this host, is gone.

    In a spool directory (``--warc s3://…``) those are the files a killed worker closed, or
    `repair_open_files` closed, and did not upload (`crawlq.store.warc.uploads`). Sorted,
    so by time of creation.
    """
    return sorted(
        entry.name
        for entry in Path(directory).glob(f"crawlq-*{SUFFIX}")
        if _dead_writer(entry.name) is not None
    )


def _dead_writer(name: str) -> int | None:
    """The pid in WARC file ``name`` when it names this host and a process that is gone."""
    match = _NAME_RE.match(name)
    if match is None or match["host"] != safe_host(socket.gethostname()):
        return None
    pid = int(match["pid"])
    return None if pid == os.getpid() or _alive(pid) else pid


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
