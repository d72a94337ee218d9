"""What a store answers about its contents: counts (`StoreCounts`) and one URL's outcome.

`StoreCounts` is returned by ``Store.counts``; `StoredOutcome` by ``Store.lookup`` (at most
`LOOKUP_MAX` fingerprints a call). Spider errors are counted per kind, the exception class
name (`crawlq.records.spider_error_type`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from crawlq.records import DeadRecord, FilteredRecord, PageRecord

__all__ = ["LOOKUP_MAX", "StoreCounts", "StoredOutcome"]


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """How many records the store holds, as returned by ``Store.counts``.

    Attributes:
        pages: Stored pages.
        items: Stored items.
        dead: Dead letters.
        filtered: Filtered URLs.
        pages_by_status: Pages per HTTP status.
        dead_by_reason: Dead letters per reason code (``timeout``, ``http_503`` …).
        filtered_by_reason: Filtered URLs per reason code (``robots_txt`` …).
        spider_errors_by_type: Pages with a spider error, per kind (the exception class name
            such as ``KeyError``; see `crawlq.records.spider_error_type`).
    """

    pages: int
    items: int
    dead: int
    filtered: int
    pages_by_status: Mapping[int, int] = field(default_factory=dict)
    dead_by_reason: Mapping[str, int] = field(default_factory=dict)
    filtered_by_reason: Mapping[str, int] = field(default_factory=dict)
    spider_errors_by_type: Mapping[str, int] = field(default_factory=dict)

    @property
    def settled(self) -> int:
        """Fingerprints with an outcome: pages + dead + filtered (invariant 1)."""
        return self.pages + self.dead + self.filtered

    @property
    def spider_errors(self) -> int:
        """Pages with a spider error, of every kind."""
        return sum(self.spider_errors_by_type.values())


LOOKUP_MAX = 1000
"""Most fingerprints one ``Store.lookup`` call takes."""


@dataclass(frozen=True, slots=True)
class StoredOutcome:
    """What the store holds for one fingerprint (``Store.lookup``).

    Exactly one of a page, a dead letter or a filtered record (invariant 1).

    Attributes:
        page: The page (its ``body`` is not loaded: None), or None.
        items: How many items the page has (0 without a page).
        dead: The dead letter, or None.
        filtered: The filtered record, or None.
    """

    page: PageRecord | None = None
    items: int = 0
    dead: DeadRecord | None = None
    filtered: FilteredRecord | None = None

    @property
    def kind(self) -> Literal["page", "dead", "filtered"]:
        """Which record it is."""
        if self.page is not None:
            return "page"
        return "dead" if self.dead is not None else "filtered"
