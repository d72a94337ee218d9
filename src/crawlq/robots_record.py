"""One origin's robots.txt as the frontier shares it between the workers of a job.

A plain value with a byte encoding: the frontier backends store the bytes
(`RobotsRecord.to_bytes`) and decode what they read (`RobotsRecord.from_bytes`). Whatever
they read is untrusted input (docs/architecture.md invariant 7: anything in Redis could have been
written by someone else), so decoding checks every field and the size, and raises
``ValueError`` instead of passing on a record it cannot vouch for.

Encoding: one line of JSON (the header: version, status, times, detail), a newline, then the
robots.txt text in UTF-8. The body is not escaped, so a record is at most a little more than
its body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, cast

__all__ = ["MAX_RECORD_BYTES", "MAX_TTL_MS", "ROBOTS_STATUSES", "RobotsRecord", "RobotsStatus"]

RobotsStatus = Literal["parsed", "unavailable", "unreachable"]
"""What fetching robots.txt gave (RFC 9309 §2.3.1): ``parsed`` (2xx, the body holds the
rules), ``unavailable`` (4xx, too many redirects: everything is allowed) or ``unreachable``
(5xx, 408/429, network failure: see `crawlq.robots`)."""

ROBOTS_STATUSES: tuple[RobotsStatus, ...] = ("parsed", "unavailable", "unreachable")

MAX_RECORD_BYTES = 2 * 1024 * 1024
"""Largest encoded record accepted, in bytes. A body is cut at 500 KiB before decoding
(RFC 9309 §2.5); as UTF-8 text it is at most 1.5 times that (a UTF-16 body), plus the header."""

MAX_TTL_MS = 24 * 3600 * 1000
"""RFC 9309 §2.4: a cached robots.txt is not used for more than 24 hours (in ms)."""

_MAX_HEADER_BYTES = 8 * 1024
_VERSION = 1


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """What one fetch of ``<origin>/robots.txt`` gave, and until when it may be used.

    Attributes:
        status: ``parsed``, ``unavailable`` or ``unreachable`` (see `RobotsStatus`).
        fetched_at_ms: Unix ms of the fetch attempt that wrote this record.
        expires_at_ms: Unix ms after which the record must be fetched again (RFC 9309 §2.4:
            at most 24 hours after a successful fetch; a few seconds after a failure).
        body: The robots.txt text (``parsed``; also an earlier good copy kept in use while
            robots.txt is unreachable, §2.4); empty otherwise.
        detail: Why it is unavailable or unreachable (status code, error); may be empty.
    """

    status: RobotsStatus
    fetched_at_ms: int
    expires_at_ms: int
    body: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        if self.status not in ROBOTS_STATUSES:
            raise ValueError(f"robots status must be one of {ROBOTS_STATUSES}, got {self.status!r}")
        for name in ("fetched_at_ms", "expires_at_ms"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")

    def fresh_at(self, now_ms: int) -> bool:
        """Whether the record may be used at ``now_ms`` (Unix ms) instead of fetching again.

        Not expired, and not valid for longer than RFC 9309 §2.4 allows from now (24 hours;
        a record claiming more was not written by a crawlq worker).
        """
        return 0 < self.expires_at_ms - now_ms <= MAX_TTL_MS

    def to_bytes(self) -> bytes:
        """The encoded record (module docstring).

        At most `MAX_RECORD_BYTES` long for a robots.txt of 500 KiB or less.
        """
        header = {
            "v": _VERSION,
            "status": self.status,
            "fetched_at_ms": self.fetched_at_ms,
            "expires_at_ms": self.expires_at_ms,
            "detail": self.detail[:1000],
        }
        line = json.dumps(header, separators=(",", ":")).encode()
        return line + b"\n" + self.body.encode("utf-8", errors="replace")

    @classmethod
    def from_bytes(cls, data: bytes) -> RobotsRecord:
        """Decode `to_bytes` output, checking everything.

        Raises:
            ValueError: Not a record of this version: too long, not JSON, a field missing or
                of the wrong type, or a body that is not UTF-8.
        """
        if not isinstance(data, bytes):
            raise ValueError(f"robots record must be bytes, got {type(data).__name__}")
        if len(data) > MAX_RECORD_BYTES:
            raise ValueError(f"robots record of {len(data)} bytes exceeds {MAX_RECORD_BYTES}")
        line, sep, body = data.partition(b"\n")
        if not sep or len(line) > _MAX_HEADER_BYTES:
            raise ValueError("robots record has no header line")
        try:
            header = json.loads(line)
            text = body.decode("utf-8")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"robots record is not readable: {exc}") from exc
        if not isinstance(header, dict) or header.get("v") != _VERSION:
            raise ValueError("robots record has no header of version 1")
        detail = header.get("detail", "")
        if not isinstance(detail, str):
            raise ValueError("robots record detail must be a string")
        status = header.get("status")
        if status not in ROBOTS_STATUSES:
            raise ValueError(f"robots record status {status!r} is unknown")
        fetched_at, expires_at = header.get("fetched_at_ms"), header.get("expires_at_ms")
        if type(fetched_at) is not int or type(expires_at) is not int:
            raise ValueError("robots record times must be integers (Unix ms)")
        return cls(cast(RobotsStatus, status), fetched_at, expires_at, text, detail)
