"""The dashboard's search box: what crawlq knows about one URL.

This is the seam where ``crawlq inspect`` plugs in: `lookup` is the only function the
dashboard calls for a search, and `Lookup` is what it renders (as a table of its fields, in
order). Today it gives the canonical URL, the fingerprint and the page stored for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawlq.errors import CrawlqError
from crawlq.request import CrawlRequest
from crawlq.store import Store
from crawlq.urls import canonicalize

__all__ = ["MAX_SCAN", "Lookup", "lookup"]

MAX_SCAN = 200_000
"""Most stored pages read to find one (the store has no lookup by fingerprint yet)."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """What the search box shows for one query.

    Attributes:
        query: What was typed.
        fields: Label -> value pairs, shown in order.
        error: Why nothing could be looked up (a query that is not a crawlable URL).
    """

    query: str
    fields: tuple[tuple[str, str], ...] = ()
    error: str | None = None


async def lookup(query: str, store: Store | None) -> Lookup:
    """Look ``query`` (a URL) up: canonical URL, fingerprint, stored page status.

    Args:
        query: The text of the search box.
        store: The job's store, or None when it is not readable from here.

    Returns:
        The result; never raises for a bad query or an unreadable store (said in ``error``
        or in a field).
    """
    query = query.strip()
    try:
        request = CrawlRequest(query)
    except (CrawlqError, ValueError) as exc:
        return Lookup(query, error=f"not a URL crawlq can fetch: {exc}")
    fields: list[tuple[str, str]] = [
        ("canonical URL", canonicalize(request.url)),
        ("fingerprint", request.fingerprint.hex()),
    ]
    if store is None:
        fields.append(("stored page", "? (no store readable from here: give --store)"))
        return Lookup(query, tuple(fields))
    try:
        page = None
        scanned = 0
        async for record in store.pages():
            scanned += 1
            if record.fingerprint == request.fingerprint:
                page = record
                break
            if scanned >= MAX_SCAN:
                break
    except CrawlqError as exc:
        fields.append(("stored page", f"? (store error: {exc})"))
        return Lookup(query, tuple(fields))
    if page is None:
        fields.append(("stored page", "none"))
    else:
        status = f"HTTP {page.status}" + (f", {page.error}" if page.error else "")
        fields += [
            ("stored page", status),
            ("final URL", page.final_url),
            ("title", page.title or ""),
            ("size", f"{page.size_bytes} bytes"),
            ("fetch time", f"{page.elapsed_s:.3f} s"),
            ("attempt", str(page.attempt)),
        ]
    return Lookup(query, tuple(fields))
