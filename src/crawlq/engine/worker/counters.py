"""What one native worker did in a run (`WorkerCounters`), counted from its outcomes."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from crawlq.engine.outcome import Kind, Outcome
from crawlq.records import spider_error_type

__all__ = ["WorkerCounters"]


@dataclass(slots=True)
class WorkerCounters:
    """What one worker did in this run (totals across runs live in the store).

    Attributes:
        pages: Page records written.
        items: Items written.
        retries: Transient failures sent back for a retry.
        dead: URLs dead-lettered, by reason.
        filtered: URLs skipped after leasing (robots.txt), by reason.
        skipped: Discovered links not followed, by scope reason (per occurrence).
        spider_errors: Pages stored with a spider error, by kind (``KeyError`` …; see
            `crawlq.records.spider_error_type`).
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
    links: int = 0
    round_trips: int = 0
    started_s: float = field(default_factory=time.monotonic)

    def count(self, o: Outcome) -> None:
        """Count a settled outcome (its links, skips, and its page, dead letter or filter)."""
        self.links += len(o.links)
        self.skipped.update(o.skipped)
        if o.kind is Kind.PAGE:
            self.pages += 1
            self.items += len(o.items)
            kind = spider_error_type(o.page.error) if o.page is not None else None
            if kind is not None:
                self.spider_errors[kind] += 1
        elif o.kind is Kind.DEAD:
            self.dead[o.reason] += 1
        elif o.kind is Kind.FILTERED:
            self.filtered[o.reason] += 1
