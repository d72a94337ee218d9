"""What crawlq knows of one URL, told as one story: ``crawlq inspect``.

A URL's story comes from two places: the frontier says where it is in the crawl (queued,
leased, waiting for a retry, dead-lettered, done: `crawlq.frontier.inspection.Inspection.inspect`),
the store says what came of it (a page, a dead letter with its detail, a filtered record:
`crawlq.store.Store.lookup`). `native_story` joins the two for the native engine;
`crawlq.celery.operate` builds the same `UrlStory` from the Celery engine's state.

States (`UrlStory.state`), and the fields of `UrlStory.details` (times ISO 8601 UTC):

========== ==================================================================================
queued     ``priority``, ``depth``, ``ready_at`` (its host's next politeness window),
           ``attempts`` (deliveries so far), ``last_error`` (the last retry's reason)
in_flight  ``worker``, ``lease_deadline``, ``attempt``, ``last_error``
delayed    ``attempt``, ``due``, ``last_error``
pending    Celery engine: ``owner``, ``due`` (see `crawlq.celery.operate`)
stored     ``status``, ``fetched_at``, ``final_url``, ``title``, ``warc_file``,
           ``warc_offset``, ``items``, ``error``, ``attempt``, ``referrer``
dead       ``reason``, ``attempts``, ``last_error`` (the store's detail), ``referrer``, ``at``
filtered   ``reason``, ``at``
done       acked in the frontier, no record in the store given (another store?)
never_seen neither the frontier nor the store has it
========== ==================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crawlq.export import iso_utc
from crawlq.frontier.inspection import UrlState
from crawlq.request import CrawlRequest
from crawlq.store.contract import StoredOutcome
from crawlq.urls import UrlKeys

__all__ = ["UrlStory", "iso_ms", "native_story", "request_fields", "stored_story"]


@dataclass(frozen=True, slots=True)
class UrlStory:
    """One URL's story (module docstring).

    Attributes:
        url: The request URL (`crawlq.urls.normalize` of what was asked).
        canonical_url: Its canonical form, which the fingerprint covers.
        fingerprint: The 20-byte fingerprint of a GET of it.
        engine: ``native`` or ``celery``.
        state: See the module docstring.
        details: The state's fields (module docstring).
        request: The request as queued (``priority``, ``depth``, ``method``,
            ``referrer``), when known.
        stored: The store's record, when there is one (``kind``: page, dead or filtered).
        notes: Plain sentences: what the story cannot tell, or what looks odd.
    """

    url: str
    canonical_url: str
    fingerprint: bytes
    engine: str
    state: str
    details: dict[str, Any] = field(default_factory=dict)
    request: dict[str, Any] | None = None
    stored: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The story as a JSON object (``crawlq inspect --json``)."""
        return {
            "url": self.url,
            "canonical_url": self.canonical_url,
            "fingerprint": self.fingerprint.hex(),
            "engine": self.engine,
            "state": self.state,
            "details": self.details,
            "request": self.request,
            "stored": self.stored,
            "notes": list(self.notes),
        }


def iso_ms(ms: int | None) -> str | None:
    """Unix ms as ISO 8601 UTC to the millisecond, or None."""
    return None if ms is None else iso_utc(ms / 1000)


def request_fields(request: CrawlRequest) -> dict[str, Any]:
    """What `UrlStory.request` shows of a request."""
    return {
        "priority": request.priority,
        "depth": request.depth,
        "method": request.method,
        "referrer": request.referrer,
    }


def stored_story(outcome: StoredOutcome) -> tuple[str, dict[str, Any]]:
    """The state and details that a store record tells (``stored``, ``dead`` or ``filtered``)."""
    if outcome.page is not None:
        p = outcome.page
        return "stored", {
            "status": p.status,
            "fetched_at": iso_utc(p.fetched_at),
            "final_url": p.final_url,
            "title": p.title,
            "warc_file": p.warc_file,
            "warc_offset": p.warc_offset,
            "items": outcome.items,
            "error": p.error,
            "attempt": p.attempt,
            "referrer": p.referrer,
        }
    if outcome.dead is not None:
        d = outcome.dead
        return "dead", {
            "reason": d.reason,
            "attempts": d.attempts,
            "last_error": d.detail,
            "referrer": d.referrer,
            "at": iso_utc(d.at),
        }
    assert outcome.filtered is not None
    f = outcome.filtered
    return "filtered", {"reason": f.reason, "at": iso_utc(f.at)}


def native_story(
    keys: UrlKeys,
    where: UrlState,
    stored: StoredOutcome | None,
    *,
    store_problem: str | None = None,
) -> UrlStory:
    """Join the frontier's state of a URL and the store's record of it.

    Args:
        keys: The URL's forms (`crawlq.urls.url_keys`).
        where: `Frontier.inspect` of its fingerprint.
        stored: `Store.lookup`'s record of it, or None.
        store_problem: Why the store could not be read, when it could not (a note).
    """
    notes: list[str] = []
    if store_problem is not None:
        notes.append(f"the store was not read: {store_problem}")
    record = None if stored is None else _stored_fields(stored)
    request = None if where.request is None else request_fields(where.request)
    state, details = _frontier_story(where, stored)
    if where.state == "done" and not where.exact:
        notes.append(
            "the job dedups with a Bloom filter: 'seen' may be a false positive for a URL "
            "never pushed"
        )
    if where.state == "done" and stored is None and store_problem is None:
        notes.append("acked in the frontier, but this store has no record of it (another store?)")
    if where.state == "unseen" and stored is not None:
        notes.append("not in this frontier: the store's record comes from another crawl")
    if where.state in ("queued", "in_flight", "delayed") and stored is not None:
        notes.append(f"crawled again: the store has an earlier {stored.kind} record of it")
    return UrlStory(
        keys.url, keys.canonical, keys.get_fingerprint, "native", state, details, request,
        record, tuple(notes),
    )  # fmt: skip


def _stored_fields(stored: StoredOutcome) -> dict[str, Any]:
    _, fields = stored_story(stored)
    return {"kind": stored.kind, **fields}


def _frontier_story(where: UrlState, stored: StoredOutcome | None) -> tuple[str, dict[str, Any]]:
    req = where.request
    if where.state == "queued":
        return "queued", {
            "priority": None if req is None else req.priority,
            "depth": None if req is None else req.depth,
            "ready_at": iso_ms(where.ready_at_ms),
            "attempts": where.attempts,
            "last_error": where.reason,
        }
    if where.state == "in_flight":
        return "in_flight", {
            "worker": where.worker_id,
            "lease_deadline": iso_ms(where.deadline_ms),
            "attempt": where.attempts,
            "last_error": where.reason,
        }
    if where.state == "delayed":
        return "delayed", {
            "attempt": where.attempts,
            "due": iso_ms(where.ready_at_ms),
            "last_error": where.reason,
        }
    if where.state == "dead":
        detail = stored.dead if stored is not None else None
        return "dead", {
            "reason": where.reason,
            "attempts": where.attempts,
            "last_error": None if detail is None else detail.detail,
            "referrer": req.referrer if req is not None else getattr(detail, "referrer", None),
            "at": iso_ms(where.dead_at_ms) or (None if detail is None else iso_utc(detail.at)),
        }
    if stored is not None:  # done (or unseen here): the store tells what came of it
        return stored_story(stored)
    return ("done", {}) if where.state == "done" else ("never_seen", {})
