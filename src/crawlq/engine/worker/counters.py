"""What one native worker did in a run (`WorkerCounters`), counted from its outcomes."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crawlq.engine.outcome import Kind, Outcome
from crawlq.records import spider_error_type

__all__ = ["WorkerCounters"]

_NUMBERS = ("pages", "items", "retries", "links", "round_trips")
_BY_REASON = ("dead", "filtered", "skipped", "spider_errors", "dropped")


@dataclass(slots=True)
class WorkerCounters:
    """What one worker did in this run (totals across runs live in the store).

    Attributes:
        pages: Page records written.
        items: Items written (a page's, and an errback's for a dead letter or a filtered
            request).
        retries: Transient failures sent back for a retry.
        dead: URLs dead-lettered, by reason.
        filtered: URLs skipped after leasing (robots.txt), by reason.
        skipped: Discovered links not followed, by scope reason (per occurrence), or
            ``frontier_full``: refused by a Redis at its maxmemory (also in ``links``).
        spider_errors: Pages stored with a spider error, by kind (``KeyError`` …; see
            `crawlq.records.spider_error_type`).
        dropped: Items not stored, by ``"<pipeline>: <reason>"`` (``validation: invalid: field
            price: …``, ``item_dedup: duplicate_item``, a pipeline's `DropItem` reason).
        links: Discovered links pushed to the frontier (before dedup).
        round_trips: Requests to the frontier's backend (`Frontier.round_trips`) in this run.
        started_s: `time.monotonic` at the start of `Worker.run`.
    """

    pages: int = 0
    items: int = 0
    retries: int = 0
    dead: Counter[str] = field(default_factory=Counter)
    filtered: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    spider_errors: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    links: int = 0
    round_trips: int = 0
    started_s: float = field(default_factory=time.monotonic)

    def count(self, o: Outcome) -> None:
        """Count a settled outcome (its links, skips, and its page, dead letter or filter)."""
        self.links += len(o.links)
        self.skipped.update(o.skipped)
        if o.dropped:
            self.dropped.update(o.dropped)
        self.items += len(o.items)  # a page's, or an errback's for a dead letter or a filter
        if o.kind is Kind.PAGE:
            self.pages += 1
            kind = spider_error_type(o.page.error) if o.page is not None else None
            if kind is not None:
                self.spider_errors[kind] += 1
        elif o.kind is Kind.DEAD:
            self.dead[o.reason] += 1
        elif o.kind is Kind.FILTERED:
            self.filtered[o.reason] += 1

    def as_json(self) -> dict[str, Any]:
        """The counts as JSON values (`summed` reads them back; ``started_s`` is left out)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _NUMBERS}
        out.update({name: dict(getattr(self, name)) for name in _BY_REASON})
        return out

    @classmethod
    def summed(cls, reports: Iterable[Mapping[str, Any]], started_s: float) -> WorkerCounters:
        """The counters of several workers' `as_json` reports together.

        Raises:
            ValueError: A report is not one of `as_json`'s shape (a count not an integer).
        """
        total = cls(started_s=started_s)
        for report in reports:
            for name in _NUMBERS:
                setattr(total, name, getattr(total, name) + _count(report[name]))
            for name in _BY_REASON:
                counts = report.get(name, {}) if name == "dropped" else report[name]
                if not isinstance(counts, Mapping):
                    raise ValueError(f"{name}: expected an object, got {counts!r}")
                getattr(total, name).update({str(k): _count(n) for k, n in counts.items()})
        return total


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected a count, got {value!r}")
    return value
