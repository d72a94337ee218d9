"""Where a crawl's WARC archive goes: a local directory, or ``s3://bucket/prefix``. Stdlib only.

``warc_dir`` names a directory, or an S3-compatible object store location
(`parse_s3_url`): each worker then writes its WARC files into a local spool directory
(``warc_spool_dir``, by default `default_spool_dir`) and uploads each one when it is closed
(`crawlq.store.warc.uploads`). The URL holds the bucket and the key prefix only; the
endpoint, region and credentials come from the standard AWS environment variables and
files (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``,
``~/.aws/config``), never from the URL, a job's settings or Redis.

A page row points at its record as the object's URL (`S3Location.url_of`) and the offset.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from crawlq.errors import ConfigError

__all__ = ["S3Location", "default_spool_dir", "is_s3_url", "names_a_scheme", "parse_s3_url"]

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
"""S3 bucket naming rules: 3-63 lowercase letters, digits, dots and hyphens."""
_IP_LIKE = re.compile(r"\d+\.\d+\.\d+\.\d+")
_SEGMENT = re.compile(r"[A-Za-z0-9!_.*'()=+,;@~-]+")
"""A prefix segment: S3's "safe" key characters (and a few more), no ``/``, no spaces."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
MAX_PREFIX_BYTES = 900
"""Longest key prefix: S3 keys end at 1,024 bytes, and crawlq's file names take about 70."""


@dataclass(frozen=True, slots=True)
class S3Location:
    """A bucket and a key prefix in an S3-compatible object store (`parse_s3_url`).

    Attributes:
        bucket: The bucket name.
        prefix: The key prefix without leading or trailing ``/`` ("" for the bucket's root).
    """

    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        """``s3://bucket/prefix``, as `parse_s3_url` reads it back."""
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def key_of(self, name: str) -> str:
        """The object key of the file ``name`` (a plain file name) under this prefix."""
        return f"{self.prefix}/{name}" if self.prefix else name

    def url_of(self, name: str) -> str:
        """``s3://bucket/prefix/name``: what a page row holds as its ``warc_file``."""
        return f"s3://{self.bucket}/{self.key_of(name)}"


def names_a_scheme(value: str) -> bool:
    """Whether ``value`` starts with ``scheme:`` (a URL, or a mistyped one, not a directory).

    ``s3:/bucket/x`` (one slash) is a mistyped URL, never a directory named ``s3:``.
    """
    return _SCHEME.match(value) is not None


def is_s3_url(value: str) -> bool:
    """Whether ``value`` is meant as an ``s3://`` URL (checked by `parse_s3_url`)."""
    return value[:5].lower() == "s3://"


def parse_s3_url(url: str, *, setting: str = "warc_dir") -> S3Location:
    """The bucket and prefix of ``s3://bucket[/prefix]``.

    Args:
        url: The URL as given.
        setting: The setting or option named in an error.

    Returns:
        The location; a trailing ``/`` is dropped.

    Raises:
        ConfigError: Not an ``s3://`` URL, no bucket, a bucket name S3 refuses, a port,
            query, fragment or user info (credentials never go in the URL; they are not
            repeated in the message), or a prefix with empty, ``.`` or ``..`` segments or
            other characters than letters, digits and ``!_.*'()=+,;@~-``.
    """
    if not is_s3_url(url):
        raise ConfigError(setting, f"{url!r:.200} is not an s3://bucket/prefix URL")
    rest = url[5:]
    authority, _, path = rest.partition("/")
    if "@" in authority:
        shown = "s3://***@" + authority.rpartition("@")[2]
        raise ConfigError(
            setting,
            f"{shown!r:.200}: credentials do not go in the URL (crawlq reads them from "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws)",
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(setting, f"{url!r:.200} is not a valid URL: {exc}") from None
    if port is not None or ":" in authority:
        raise ConfigError(
            setting,
            f"{url!r:.200}: an s3:// URL names a bucket, not a host and port (the endpoint "
            "comes from AWS_ENDPOINT_URL)",
        )
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise ConfigError(setting, f"{url!r:.200}: an s3:// URL takes no query or fragment")
    if not authority:
        raise ConfigError(setting, f"{url!r:.200} names no bucket: use s3://bucket/prefix")
    if not _BUCKET.fullmatch(authority) or ".." in authority or _IP_LIKE.fullmatch(authority):
        raise ConfigError(
            setting,
            f"{url!r:.200}: {authority!r:.80} is not a valid bucket name (3-63 lowercase "
            "letters, digits, dots and hyphens, starting and ending with a letter or digit)",
        )
    prefix = path.rstrip("/")
    for segment in prefix.split("/") if prefix else ():
        if segment in ("", ".", "..") or not _SEGMENT.fullmatch(segment):
            raise ConfigError(
                setting,
                f"{url!r:.200}: the key prefix {prefix!r:.100} has an empty, '.' or '..' "
                "segment or a character other than letters, digits and !_.*'()=+,;@~-",
            )
    if len(prefix.encode()) > MAX_PREFIX_BYTES:
        raise ConfigError(setting, f"the key prefix is over {MAX_PREFIX_BYTES} bytes")
    return S3Location(authority, prefix)


def default_spool_dir(location: S3Location) -> Path:
    """Where WARC files bound for ``location`` wait for their upload, by default.

    ``$XDG_CACHE_HOME/crawlq/warc-spool/<bucket>/<prefix>`` (``~/.cache`` when the variable
    is unset): the same directory for every worker of this user on this machine, so a
    worker started again finds the files a killed one left (`crawlq.store.warc.uploads`).
    """
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(cache) / "crawlq" / "warc-spool" / location.bucket
    return path.joinpath(*location.prefix.split("/")) if location.prefix else path
