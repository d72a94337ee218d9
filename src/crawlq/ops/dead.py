"""Dead letters an operator can act on: ``crawlq dead list`` and ``crawlq dead replay``.

The native engine's dead letters live in the frontier (`Frontier.dead_letters`: what a
replay puts back) and in the store (`crawlq.store.Store.lookup`: the failure's detail). A
listing joins the two; a replay goes through the frontier (`Frontier.replay_dead`): each URL
returns to its host's queue under its fingerprint, so dedup and politeness hold as for any
request, its attempts are counted afresh, and the job's scope is checked again (`job_scope`):
a dead letter the scope no longer takes stays dead. A replay is a producer under the job's
queue bounds (``max_queued``, ``max_queued_per_host``, ``when_full``; `job_bounds`), as
seeding is (`crawlq.engine.seeding.replay_into_room`): at ``block`` it waits for room, at
``drop-lowest`` the lowest priorities become ``frontier_full`` dead letters.
``crawl --retry-dead`` is a replay of every dead letter. The Celery engine's counterpart is
`crawlq.celery.operate`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from crawlq.engine.seeding import replay_into_room
from crawlq.errors import ConfigError, QueueFullTimeout
from crawlq.export import iso_utc
from crawlq.frontier import Frontier
from crawlq.frontier.inspection import DeadFilter, DeadLetter
from crawlq.frontier.queue import QueueBounds
from crawlq.rules.scope import Scope, crawl_domains
from crawlq.settings import coerce_settings
from crawlq.store import Store
from crawlq.store.contract import LOOKUP_MAX

__all__ = [
    "DeadRow",
    "ReplayReport",
    "job_bounds",
    "job_scope",
    "native_dead_rows",
    "replay_native",
]

SCOPE_FIELDS = ("allowed_domains", "include", "exclude", "max_depth")
"""The job settings that make its scope (`crawlq.rules.scope.Scope`)."""

BOUND_FIELDS = ("max_queued", "max_queued_per_host", "when_full")
"""The job settings that bound its queue (`crawlq.frontier.queue.QueueBounds`)."""


@dataclass(frozen=True, slots=True)
class DeadRow:
    """One dead letter as ``crawlq dead list`` shows it.

    Attributes:
        url: The URL.
        fingerprint: Its fingerprint.
        host: Its politeness key.
        reason: The dead-letter reason code.
        attempts: Deliveries it had (None when not known).
        at: When it was dead-lettered, Unix seconds (None when not known).
        referrer: The page that linked to it (None: a seed, or not known).
        detail: The failure's detail, from the store (None when the store has none).
        depth: Its link depth.
    """

    url: str
    fingerprint: bytes
    host: str
    reason: str
    attempts: int | None
    at: float | None
    referrer: str | None
    detail: str | None
    depth: int

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object (``crawlq dead list --json``: one per line)."""
        return {
            "url": self.url,
            "reason": self.reason,
            "host": self.host,
            "attempts": self.attempts,
            "at": None if self.at is None else iso_utc(self.at),
            "referrer": self.referrer,
            "detail": self.detail,
            "depth": self.depth,
            "fingerprint": self.fingerprint.hex(),
        }


@dataclass(slots=True)
class ReplayReport:
    """What a replay did (or, with ``dry_run``, would do).

    Attributes:
        replayed: URLs put back in the queue (dry run: that would be).
        by_reason: Of those, how many per dead-letter reason.
        out_of_scope: Matching dead letters left dead because the job's scope does not take
            them any more.
        dry_run: Nothing was changed.
        bounds: The job's queue bounds the replay went under.
        waited: The job's queue was full (``block``): the replay waited for room.
        dropped: Requests dead-lettered as ``frontier_full`` (``drop-lowest``): replayed
            ones that did not fit, and queued ones they outranked.
        left_full: Matching dead letters left dead because the queue stayed full for the
            wait's limit (``timeout``).
        timeout: Why the wait stopped (``--max-push-wait``), or None.
    """

    replayed: int = 0
    by_reason: Counter[str] = field(default_factory=Counter)
    out_of_scope: int = 0
    dry_run: bool = False
    bounds: QueueBounds = field(default_factory=QueueBounds)
    waited: bool = False
    dropped: int = 0
    left_full: int = 0
    timeout: QueueFullTimeout | None = None


def job_scope(stored: Mapping[str, Any] | None, source: str) -> Scope | None:
    """The scope of a job from its stored settings, or None when it has none stored.

    Raises:
        ConfigError: A stored scope value of the wrong type (shared state is untrusted);
            the message names the setting and ``source``.
    """
    if not stored:
        return None
    values = coerce_settings({k: stored[k] for k in SCOPE_FIELDS if k in stored}, source)
    return Scope(
        crawl_domains(values.get("allowed_domains") or ()),  # the job's: stored when seeded
        values.get("include") or (),
        values.get("exclude") or (),
        values.get("max_depth"),
    )


def job_bounds(stored: Mapping[str, Any] | None, source: str) -> QueueBounds:
    """The queue bounds of a job from its stored settings (unbounded when none are stored).

    Raises:
        ConfigError: A stored bound of the wrong type (shared state is untrusted); the
            message names the setting and ``source``.
    """
    if not stored:
        return QueueBounds()
    values = coerce_settings({k: stored[k] for k in BOUND_FIELDS if k in stored}, source)
    try:
        return QueueBounds(
            values.get("max_queued"),
            values.get("max_queued_per_host"),
            values.get("when_full") or "block",
        )
    except ValueError as exc:
        raise ConfigError("max_queued", f"{source}: {exc}") from exc


async def native_dead_rows(
    frontier: Frontier, store: Store | None, where: DeadFilter
) -> AsyncIterator[DeadRow]:
    """Stream the frontier's dead letters that ``where`` matches, with the store's detail.

    The store is asked once per chunk of `LOOKUP_MAX` letters; without a store the detail is
    None and the time comes from the frontier alone.
    """
    chunk: list[DeadLetter] = []
    async for letter in frontier.dead_letters(where):
        chunk.append(letter)
        if len(chunk) >= LOOKUP_MAX:
            for row in await _rows(chunk, store):
                yield row
            chunk = []
    for row in await _rows(chunk, store):
        yield row


async def _rows(letters: list[DeadLetter], store: Store | None) -> list[DeadRow]:
    if not letters:
        return []
    # the store keys a record by the URL's record fingerprint: a cookie wall's revisit has a
    # fingerprint of its own (it covers its cookies) but shares the URL's record
    found = (
        {} if store is None else await store.lookup([d.request.record_fingerprint for d in letters])
    )
    rows = []
    for letter in letters:
        req = letter.request
        outcome = found.get(req.record_fingerprint)
        record = None if outcome is None else outcome.dead
        at = None if letter.dead_at_ms is None else letter.dead_at_ms / 1000
        if at is None and record is not None:
            at = record.at
        attempts = (
            letter.attempts if letter.attempts is not None else getattr(record, "attempts", None)
        )
        rows.append(
            DeadRow(
                url=req.url,
                fingerprint=req.fingerprint,
                host=req.host,
                reason=letter.reason,
                attempts=attempts,
                at=at,
                referrer=req.referrer or getattr(record, "referrer", None),
                detail=None if record is None else record.detail,
                depth=req.depth,
            )
        )
    return rows


async def replay_native(
    frontier: Frontier,
    where: DeadFilter,
    scope: Scope | None,
    *,
    dry_run: bool = False,
    bounds: QueueBounds | None = None,
    max_wait_s: float | None = None,
) -> ReplayReport:
    """Replay the matching dead letters through the frontier (module docstring).

    Args:
        frontier: The job's frontier (opened for writing unless ``dry_run``).
        where: Which dead letters.
        scope: The job's scope (`job_scope`), or None to take every one.
        dry_run: Count what would be replayed; change nothing.
        bounds: The job's queue bounds (`job_bounds`); None keeps the frontier's own.
        max_wait_s: At a ``block`` bound, the longest wait for room (None: no limit).
    """
    bounds = bounds or frontier.bounds
    report = ReplayReport(dry_run=dry_run, bounds=bounds)
    chosen: Counter[str] = Counter()
    out_of_scope: set[bytes] = set()  # a wait for room replays again: count each once

    def admit(letter: DeadLetter) -> bool:
        if scope is not None and scope.check(letter.request) is not None:
            out_of_scope.add(letter.request.fingerprint)
            return False
        chosen[letter.reason] += 1
        return True

    if dry_run:
        async for letter in frontier.dead_letters(where):
            admit(letter)
        report.replayed = chosen.total()
        report.by_reason = chosen
    else:
        done, waited, timeout = await replay_into_room(
            frontier, where, admit, bounds=bounds, max_wait_s=max_wait_s
        )
        report.replayed, report.by_reason = done.queued, done.by_reason
        report.dropped, report.left_full, report.timeout = done.dropped, done.refused, timeout
        report.waited = waited
    report.out_of_scope = len(out_of_scope)
    return report
