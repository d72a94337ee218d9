"""The shared robots.txt contract (`SharedRobots`) and the record it stores (`RobotsRecord`).

The job keeps one copy of each origin's robots.txt so that it is fetched once per origin per
job, not once per worker: `SharedRobots.robots_claim` reads it and claims its fetch in one step
(single flight across processes), `SharedRobots.robots_put` stores the result.

`RobotsRecord` is one origin's robots.txt as the frontier shares it between the workers.

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
from typing import Literal, Protocol, cast

__all__ = [
    "MAX_RECORD_BYTES",
    "MAX_TTL_MS",
    "ROBOTS_STATUSES",
    "RobotsRecord",
    "RobotsStatus",
    "SharedRobots",
]

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


class SharedRobots(Protocol):
    """The job's one copy of each origin's robots.txt (module docstring)."""

    async def robots_get(self, origin: str) -> RobotsRecord | None:
        """The job's stored robots.txt record of ``origin``, expired or not.

        A stored value that does not decode (corrupt, or larger than
        `MAX_RECORD_BYTES`: shared state is untrusted, invariant 7) is
        logged once and reported as missing, so the caller fetches robots.txt again and its
        `SharedRobots.robots_put` replaces it.

        Args:
            origin: ``scheme://host[:port]`` (RFC 9309 §2.3: one robots.txt per origin).

        Returns:
            The record, or None when there is none (or none that can be read).
        """
        ...

    async def robots_claim(
        self, origin: str, holder: str, ttl_s: float, *, force: bool = False
    ) -> tuple[RobotsRecord | None, bool]:
        """Read ``origin``'s record and, unless it is fresh, claim its fetch: one atomic step.

        The single-flight step across processes, and the one round trip of a worker that does
        not have the origin in memory: a fresh record (`RobotsRecord.fresh_at` the backend's
        now) comes back unclaimed; otherwise (missing, unreadable, expired) the caller gets
        the claim unless another worker's live claim holds it. The claimer fetches robots.txt
        and calls `SharedRobots.robots_put`; the others call again a little later (or give
        their lease back). A claim not followed by `SharedRobots.robots_put` within ``ttl_s``
        (its worker died) lapses, and the next caller gets it. Claiming again while holding
        the claim extends it.

        Args:
            origin: ``scheme://host[:port]``.
            holder: Stable id of the claimer (worker id and process).
            ttl_s: Seconds the claim is held at most (> 0): longer than one fetch may take.
            force: Claim even when the stored record looks fresh: the caller could not read
                it (the record is reported as None then).

        Returns:
            ``(record, claimed)``: the stored record (None when missing or unreadable; stale
            ones too, as the earlier copy RFC 9309 §2.4 lets a crawler keep while robots.txt
            is unreachable), and whether ``holder`` holds the claim now.
        """
        ...

    async def robots_put(self, origin: str, record: RobotsRecord) -> None:
        """Store ``origin``'s robots.txt record for every worker and end any claim on it.

        Replaces the stored record; in one atomic step with ending the claim, so a worker
        that sees no claim sees the record.
        """
        ...
