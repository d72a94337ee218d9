"""The wire format of crawlq's Celery tasks: one `Entry` per URL, JSON only.

A ``crawlq.scrape_many`` task carries ``(job, entries)``, each entry ``[request JSON,
attempt, retry]`` (`Entry.to_wire`). Anyone who can send a task sends these, so they are
parsed as untrusted input (`Entry.from_wire`, `parse_entries`): an entry that cannot be
crawled is dropped with a log line, never failing the task or the worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crawlq.errors import ConfigError
from crawlq.request import CrawlRequest

__all__ = ["MAX_ATTEMPT", "MAX_ENTRY_CHARS", "Entry", "Publish", "chunks", "parse_entries"]

logger = logging.getLogger(__name__)

MAX_ENTRY_CHARS = 64 * 1024
"""Longest request JSON in a task entry, in characters (as an inbox entry's byte limit)."""


MAX_ATTEMPT = 1000
"""Largest attempt number a task entry may carry."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One URL in a task message.

    Attributes:
        request: The request.
        attempt: 1 for the first try, +1 per retry of a transient failure.
        retry: This entry was sent as a retry (counted in the job's ``delayed`` until it runs).
    """

    request: CrawlRequest
    attempt: int = 1
    retry: bool = False

    def to_wire(self) -> list[object]:
        """The JSON form in a task message: ``[request JSON, attempt, retry]``."""
        return [self.request.to_json(), self.attempt, self.retry]

    @classmethod
    def from_wire(cls, value: object) -> Entry:
        """Parse `to_wire` output (untrusted: anyone who can send a task sends it).

        Raises:
            ValueError: Not a list of request JSON (at most `MAX_ENTRY_CHARS`, checked by
                `CrawlRequest.from_json`), attempt (an int in ``1..MAX_ATTEMPT``) and retry
                flag (a boolean).
            InvalidURL: The URL cannot be crawled.
        """
        if not isinstance(value, list | tuple) or not value or not isinstance(value[0], str):
            raise ValueError(f"not a crawlq task entry: {value!r:.200}")
        if len(value[0]) > MAX_ENTRY_CHARS:
            raise ValueError(f"task entry of {len(value[0])} characters (most {MAX_ENTRY_CHARS})")
        attempt = value[1] if len(value) > 1 else 1
        if type(attempt) is not int or not 1 <= attempt <= MAX_ATTEMPT:
            raise ValueError(f"attempt must be an integer in 1..{MAX_ATTEMPT}: {attempt!r:.40}")
        retry = value[2] if len(value) > 2 else False
        if not isinstance(retry, bool):
            raise ValueError(f"retry must be true or false, got {retry!r:.40}")
        return cls(CrawlRequest.from_json(value[0]), attempt, retry)


Publish = Callable[[Sequence[Entry], int, float], None]
"""Send entries as one task: ``(entries, crawlq priority 0..9, countdown seconds)``."""


def parse_entries(values: object) -> list[Entry]:
    """Parse a task's entries, dropping (and logging) the ones that cannot be crawled.

    Whatever an entry holds (wrong types, numbers out of range, deep nesting, huge text),
    it is dropped with an error log line; it never fails the task or the worker.

    Raises:
        ConfigError: ``values`` is not a list.
    """
    if not isinstance(values, list | tuple):
        raise ConfigError("entries", f"expected a list of entries, got {values!r:.200}")
    out = []
    for value in values:
        try:
            out.append(Entry.from_wire(value))
        except Exception as exc:  # an entry is untrusted: whatever it raises drops it alone
            logger.error("dropped a task entry that cannot be crawled: %.500s", exc)
    return out


def chunks(entries: list[Entry], size: int) -> list[list[Entry]]:
    """``entries`` in order, in tasks of at most ``size`` (``celery_batch``) each."""
    return [entries[i : i + size] for i in range(0, len(entries), size)]
