"""Uploading closed WARC files from the spool directory to the object store.

With ``--warc s3://bucket/prefix`` a worker writes its WARC files into a local spool
directory exactly as it writes them into ``--warc DIR`` (`crawlq.store.warc.writer`), and
hands each file to its `Uploader` when it is closed (rotated, or the writer closed). The
uploader sends the files one after the other on a thread of its own, so writing goes on
meanwhile; a file is removed from the spool only after the store confirmed it (the upload
returned and the object's size is the file's: `crawlq.store.warc.objects.ObjectStore.upload`).

Nothing is lost when a worker dies or the store is down:

* an upload that fails is logged and tried again before the next file's, and at close;
* a file still in the spool when its process is gone (``kill -9`` before or during the
  upload, or the store down until exit) is uploaded by the next writer started on the same
  spool directory on the same host, after `crawlq.store.warc.files.repair_open_files` has
  closed what was left ``.open`` (`Uploader.adopt_leftovers`).

An upload is idempotent (the same bytes under the same key), so a file sent twice, by a worker
killed after the upload and before the removal, is still one object. A multipart upload cut
short by a kill leaves parts that S3 keeps until a lifecycle rule
(``AbortIncompleteMultipartUpload``) removes them; the file itself is sent again whole.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crawlq.errors import StoreError
from crawlq.store.warc.files import closed_files_of_dead_processes
from crawlq.store.warc.objects import ObjectStore

__all__ = ["Uploader"]

logger = logging.getLogger("crawlq.store.warc")  # one logger for WARC archiving


class Uploader:
    """Uploads the closed WARC files of one spool directory, in the order they were handed over.

    Args:
        objects: The bucket and prefix they go to.
        spool: The spool directory.
    """

    def __init__(self, objects: ObjectStore, spool: Path) -> None:
        self.objects = objects
        self.spool = spool
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crawlq-upload")
        self.uploaded: list[str] = []
        """Names of the files uploaded and removed from the spool, in order."""

    def adopt_leftovers(self) -> list[str]:
        """Queue the closed files that dead processes of this host left in the spool.

        Returns:
            Their names (logged too).
        """
        names = closed_files_of_dead_processes(self.spool)
        if names:
            logger.warning(
                "uploading %d WARC file(s) left in %s by stopped workers: %s",
                len(names),
                self.spool,
                ", ".join(names),
            )
        for name in names:
            self.submit(name)
        return names

    def submit(self, name: str) -> None:
        """Queue the closed file ``name`` of the spool for upload; returns at once."""
        with self._lock:
            if name not in self._pending:
                self._pending.append(name)
        self._executor.submit(self._drain)

    @property
    def pending(self) -> list[str]:
        """Files handed over and not uploaded yet (being sent, waiting, or failed)."""
        with self._lock:
            return list(self._pending)

    def close(self) -> list[str]:
        """Upload what is pending (trying failed files once more), then stop. Blocking.

        Returns:
            The files still not uploaded (logged as errors): they stay in the spool, and the
            next writer started on it uploads them.
        """
        self._executor.submit(self._drain)
        self._executor.shutdown(wait=True)
        left = self.pending
        if left:
            logger.error(
                "%d WARC file(s) not uploaded to %s, kept in %s for the next worker started "
                "on this spool directory: %s",
                len(left),
                self.objects.location.url,
                self.spool,
                ", ".join(left),
            )
        return left

    def _drain(self) -> None:
        """Upload every pending file, oldest first; stop at the first failure (own thread)."""
        for name in self.pending:
            path = self.spool / name
            try:
                if path.is_file():
                    url = self.objects.upload(path, name)
                    path.unlink(missing_ok=True)
                    logger.info("uploaded WARC file %s to %s", name, url)
                else:  # another worker of this spool uploaded the leftover first
                    url = ""
            except FileNotFoundError:  # uploaded by another worker of this spool meanwhile
                url = ""
            except (StoreError, OSError) as exc:
                logger.error("WARC file %s kept in %s: %s", name, self.spool, exc)
                return
            with self._lock:
                self._pending.remove(name)
                if url:
                    self.uploaded.append(name)
