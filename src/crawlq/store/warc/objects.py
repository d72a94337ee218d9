"""The object store behind ``--warc s3://bucket/prefix``; boto3 is imported only here.

Why boto3 (``pip install 'crawlq[s3]'``): it is AWS's own SDK, works with every
S3-compatible server, reads the standard configuration chain (``AWS_ENDPOINT_URL``,
``AWS_REGION``, ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``,
``AWS_PROFILE``, ``~/.aws/config`` and ``credentials``, instance roles), and its transfer
manager does multipart uploads with retries. It is synchronous: crawlq calls it from the
WARC writer's upload thread and from reader threads, never on the event loop, so an async
SDK (aiobotocore, s3fs) would buy nothing but a tighter pin on botocore.

Every boto3 or botocore error becomes a `StoreError` here (`_failure`), naming the endpoint,
the bucket and the key, never a credential: the endpoint goes through `crawlq.secrecy.redact`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, BinaryIO, cast

import boto3
import botocore.config
import botocore.exceptions
from boto3.s3.transfer import TransferConfig

from crawlq.errors import StoreError
from crawlq.secrecy import redact
from crawlq.settings.archive import S3Location

__all__ = ["MULTIPART_CHUNK_BYTES", "MULTIPART_THRESHOLD_BYTES", "ObjectStore"]

logger = logging.getLogger("crawlq.store.warc")  # one logger for WARC archiving

MULTIPART_THRESHOLD_BYTES = 64 * 1024 * 1024
"""Files from this size on are uploaded in parts (S3 takes up to 5 GB in one PUT)."""
MULTIPART_CHUNK_BYTES = 64 * 1024 * 1024
"""Size of each part: a 1 GB WARC file is 16 parts (S3 allows 10,000, each 5 MB or more)."""
_CLIENT_CONFIG = botocore.config.Config(
    retries={"max_attempts": 4, "mode": "standard"},  # botocore's backoff with jitter
    connect_timeout=10,
    read_timeout=60,
)


class ObjectStore:
    """One bucket and key prefix of an S3-compatible store, through one boto3 client.

    Build with `ObjectStore.connect`. Thread-safe (boto3 clients are); every method blocks.

    Args:
        location: The bucket and prefix.
        client: A boto3 S3 client.
        multipart_threshold_bytes: Files from this size on are uploaded in parts.
        multipart_chunk_bytes: Size of each part.
    """

    def __init__(
        self,
        location: S3Location,
        client: Any,
        *,
        multipart_threshold_bytes: int = MULTIPART_THRESHOLD_BYTES,
        multipart_chunk_bytes: int = MULTIPART_CHUNK_BYTES,
    ) -> None:
        self.location = location
        self._client = client
        self._transfer = TransferConfig(
            multipart_threshold=multipart_threshold_bytes,
            multipart_chunksize=multipart_chunk_bytes,
            max_concurrency=4,
        )

    @classmethod
    def connect(cls, location: S3Location, **sizes: int) -> ObjectStore:
        """A client for ``location``, from the standard AWS configuration; the bucket checked.

        Args:
            location: The bucket and prefix.
            sizes: ``multipart_threshold_bytes`` and ``multipart_chunk_bytes`` (tests).

        Raises:
            StoreError: The endpoint cannot be reached, no credentials are configured, the
                bucket does not exist or cannot be written; the message names them.
        """
        try:
            client = boto3.session.Session().client("s3", config=_CLIENT_CONFIG)
        except botocore.exceptions.BotoCoreError as exc:
            raise StoreError(f"cannot set up the S3 client for {location.url}: {exc}") from None
        store = cls(location, client, **sizes)
        what = f"bucket {location.bucket!r} of {location.url}"
        store._call(what, client.head_bucket, Bucket=location.bucket)
        return store

    @property
    def endpoint(self) -> str:
        """The endpoint URL in use, with any password in it hidden."""
        return redact(str(self._client.meta.endpoint_url))

    def upload(self, path: Path, name: str) -> str:
        """Upload the file ``path`` as ``name`` under the prefix; confirm it is all there.

        Returns:
            The object's URL (``s3://bucket/key``).

        Raises:
            StoreError: The upload failed, or the stored object's size is not the file's.
        """
        key = self.location.key_of(name)
        size = path.stat().st_size
        what = f"upload of {path} to {self.location.url_of(name)}"
        self._call(
            what,
            self._client.upload_file,
            str(path),
            self.location.bucket,
            key,
            ExtraArgs={"ContentType": "application/warc"},
            Config=self._transfer,
        )
        head = self._call(what, self._client.head_object, Bucket=self.location.bucket, Key=key)
        stored = int(head.get("ContentLength", -1))
        if stored != size:
            raise StoreError(f"{what}: the object holds {stored} bytes, the file {size}")
        return self.location.url_of(name)

    def open_at(self, name: str, offset: int) -> BinaryIO:
        """A stream of the object ``name`` from byte ``offset`` on (a ranged GET); close it.

        Raises:
            StoreError: No such object (not uploaded yet, or removed), or the store failed.
        """
        key = self.location.key_of(name)
        where = self.location.url_of(name)
        answer = self._call(
            where, self._client.get_object, Bucket=self.location.bucket, Key=key,
            Range=f"bytes={offset}-",
        )  # fmt: skip
        return cast(BinaryIO, answer["Body"])

    def names(self) -> list[str]:
        """The names of the objects directly under the prefix, sorted."""
        prefix = self.location.key_of("")
        paginator = self._client.get_paginator("list_objects_v2")
        pages = self._call(
            f"listing of {self.location.url}",
            lambda: list(paginator.paginate(Bucket=self.location.bucket, Prefix=prefix)),
        )
        keys = [obj["Key"] for page in pages for obj in page.get("Contents", ())]
        return sorted(k[len(prefix) :] for k in keys if "/" not in k[len(prefix) :])

    def _call(self, what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise StoreError(self._failure(what, exc)) from None
        except boto3.exceptions.Boto3Error as exc:  # S3UploadFailedError wraps the cause
            raise StoreError(self._failure(what, exc)) from None

    def _failure(self, what: str, exc: Exception) -> str:
        """One line: what failed, at which endpoint, and why (no credential in it)."""
        at = f"{what} at S3 endpoint {self.endpoint}"
        if isinstance(exc, botocore.exceptions.NoCredentialsError | _PartialCredentials):
            return (
                f"{at}: no S3 credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "or AWS_PROFILE)"
            )
        if isinstance(exc, botocore.exceptions.EndpointConnectionError):
            return f"{at}: cannot connect (is AWS_ENDPOINT_URL right?)"
        code = ""
        if isinstance(exc, botocore.exceptions.ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("NoSuchBucket", "404") and what.startswith("bucket"):
            return f"{at}: no such bucket"
        if code in ("NoSuchKey", "404"):
            return f"{at}: no such object"
        if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            return f"{at}: access denied ({code}): check the credentials and the bucket policy"
        return f"{at}: {redact(str(exc))}"


_PartialCredentials = botocore.exceptions.PartialCredentialsError
