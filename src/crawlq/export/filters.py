"""Which records an export keeps: ``--status``, ``--host`` and ``--spider`` (`RecordFilter`).

The store has the columns these read for some kinds of records only: pages (and ``errors``)
have a status, a URL and a spider name; items a URL and a spider name; dead letters and
filtered records a URL only. `RecordFilter.check` refuses a filter that the kind of record
cannot answer instead of exporting nothing.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TypeVar

from crawlq.errors import InvalidURL
from crawlq.urls import host_key, host_name, split_host

__all__ = ["RecordFilter", "kept"]

_STATUS = re.compile(r"^[1-5](?:[0-9]{2}|xx)$")
_HAS = {
    "status": ("pages", "errors"),
    "spider": ("pages", "errors", "items"),
    "host": ("pages", "errors", "items", "dead", "filtered"),
}

_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Keep the records that match every filter given (None: no filter).

    Attributes:
        status: Comma-separated codes or classes: ``200``, ``4xx``, ``301,302``.
        host: A host name (``docs.example.org``: any port) or ``host:port``; any case, an
            IP literal in any notation (`crawlq.urls.split_host`).
        spider: The spider's name as stored (``Spider.name``).
    """

    status: str | None = None
    host: str | None = None
    spider: str | None = None

    def __post_init__(self) -> None:
        if self.status is not None:
            for part in self.status.split(","):
                if not _STATUS.match(part.strip().lower()):
                    raise ValueError(
                        f"--status {self.status!r}: expected codes or classes such as 200, "
                        f"4xx or 301,302 (bad part {part.strip()!r})"
                    )
        if self.host is not None and not self.host.strip():
            raise ValueError("--host: empty host name")

    def check(self, what: str) -> None:
        """Refuse a filter that records of kind ``what`` have no column for.

        Raises:
            ValueError: Naming the option and the kinds it applies to.
        """
        for name, kinds in _HAS.items():
            if getattr(self, name) is not None and what not in kinds:
                raise ValueError(
                    f"--{name} applies to --what {', '.join(kinds)} only: the store keeps no "
                    f"{name} for {what} records"
                )

    @property
    def empty(self) -> bool:
        """True when no filter is given."""
        return self.status is None and self.host is None and self.spider is None

    def keeps(self, record: object) -> bool:
        """Whether ``record`` (a page, item, dead or filtered record) matches."""
        if self.status is not None and not self._status_ok(getattr(record, "status", None)):
            return False
        if self.spider is not None and getattr(record, "spider", None) != self.spider:
            return False
        return self.host is None or self._host_ok(str(getattr(record, "url", "")))

    def _status_ok(self, status: object) -> bool:
        if not isinstance(status, int):
            return False
        code = str(status)
        for part in (p.strip().lower() for p in (self.status or "").split(",")):
            if part == code or (part.endswith("xx") and code[0] == part[0]):
                return True
        return False

    def _host_ok(self, url: str) -> bool:
        wanted, port = split_host(self.host or "")
        if port:
            try:
                return split_host(host_key(url)) == (wanted, port)
            except InvalidURL:
                return False
        return host_name(url) == wanted


async def kept(records: AsyncIterator[_R], where: RecordFilter | None) -> AsyncIterator[_R]:
    """The records of ``records`` that ``where`` keeps (all when None), streaming."""
    async for record in records:
        if where is None or where.keeps(record):
            yield record
