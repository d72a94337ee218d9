"""``crawlq inspect`` and ``crawlq dead list|replay`` for a job run by the Celery engine.

The Celery engine keeps less state than the native frontier (`crawlq.celery.runtime.state`): a
URL is *pending* from its admission until its outcome is stored, and Redis knows who admitted it,
when its task is due and which worker's task runs it now; the broker holds the task itself.
So a story here tells:

* ``pending`` (queued in the broker, waiting for a retry's countdown, or reserved by a
  worker: which one of these is the broker's to tell, not Redis's), with its due time and who
  admitted it (``owner``);
* ``in_flight`` when a worker's task runs it, with that worker and its last heartbeat (there
  is no lease deadline: a worker whose heartbeat is stale has its URLs sent again);
* its outcome from the store once settled (``stored``, ``dead``, ``filtered``).

It cannot tell a pending URL's attempt number nor the last error of a retry (they travel in
the task message), and a lost task message (celery/celery#7950) looks like any pending URL
until ``crawl --engine celery`` sends it again.

Dead letters are the store's (reason, detail, attempts, time, referrer); the request itself is
kept in Redis (``dead_requests``) so that a replay sends it as it was. A replay makes each URL
pending again (`crawlq.celery.runtime.inspection.Inspection.replay`: once, and only if the job
admitted it and it is not pending) and sends it as a task of its own; the job's scope is checked
again as for the native engine. A dead letter of a job that predates ``dead_requests`` is sent as a
GET of its URL with its depth and referrer (its callback, meta and priority were not kept).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from crawlq.celery.runtime.config import clamp_priority
from crawlq.celery.runtime.inspection import Inspection
from crawlq.celery.runtime.state import CeleryState
from crawlq.celery.runtime.wire import Entry
from crawlq.errors import BrokerUnavailable
from crawlq.frontier.inspection import DeadFilter
from crawlq.ops.dead import DeadRow, ReplayReport
from crawlq.ops.story import UrlStory, iso_ms, request_fields, stored_story
from crawlq.records import DeadRecord
from crawlq.request import CrawlRequest
from crawlq.rules.scope import Scope
from crawlq.settings import Settings
from crawlq.store import Store
from crawlq.store.contract import LOOKUP_MAX, StoredOutcome
from crawlq.urls import UrlKeys, host_key

__all__ = ["celery_dead_rows", "celery_story", "replay_celery", "task_sender"]

_CANNOT_TELL = (
    "Celery engine: whether a pending URL waits in the broker's queue, for a retry's "
    "countdown or in a worker's prefetch, its attempt number and its last retry's error "
    "are in the task message, not in Redis (ask the broker: celery inspect)"
)

Send = Callable[[Sequence[CrawlRequest]], None]
"""Sends each request as a task of its own (`task_sender`)."""


async def celery_story(
    keys: UrlKeys,
    state: CeleryState,
    stored: StoredOutcome | None,
    *,
    store_problem: str | None = None,
) -> UrlStory:
    """One URL's story from the Celery engine's state and the store (module docstring)."""
    task = await Inspection(state).inspect(keys.get_fingerprint)
    notes: list[str] = []
    if store_problem is not None:
        notes.append(f"the store was not read: {store_problem}")
    record = None if stored is None else {"kind": stored.kind, **stored_story(stored)[1]}
    request = None if task.request is None else request_fields(task.request)
    details: dict[str, Any]
    if task.state == "running":
        state_name = "in_flight"
        details = {
            "worker": task.runner,
            "heartbeat": iso_ms(task.heartbeat_ms),
            "owner": task.owner,
        }
        notes.append(_CANNOT_TELL)
    elif task.state == "pending":
        state_name = "pending"
        details = {"owner": task.owner, "due": iso_ms(task.due_ms)}
        notes.append(_CANNOT_TELL)
    elif stored is not None:
        state_name, details = stored_story(stored)
        if task.state == "unseen":
            notes.append("not admitted in this job: the store's record comes from another crawl")
    elif task.state == "settled":
        state_name, details = "done", {}
        notes.append("settled in the job, but this store has no record of it (another store?)")
    else:
        state_name, details = "never_seen", {}
    return UrlStory(
        keys.url, keys.canonical, keys.get_fingerprint, "celery", state_name, details,
        request, record, tuple(notes),
    )  # fmt: skip


async def celery_dead_rows(
    state: CeleryState, store: Store, where: DeadFilter
) -> AsyncIterator[DeadRow]:
    """The store's dead letters that ``where`` matches and that are not pending again.

    Reads the whole dead-letter table of the store (in the store's chunks), so a store shared
    by several jobs lists the dead letters this job has admitted... and those of the others:
    a replay skips the URLs this job never admitted.
    """
    chunk: list[DeadRecord] = []
    async for record in store.dead():
        host = _url_host(record.url)
        at_ms = round(record.at * 1000)
        if host is not None and where.matches(host, record.reason, at_ms):
            chunk.append(record)
            if len(chunk) >= LOOKUP_MAX:
                for row in await _not_pending(state, chunk):
                    yield row
                chunk = []
    for row in await _not_pending(state, chunk):
        yield row


async def _not_pending(state: CeleryState, records: list[DeadRecord]) -> list[DeadRow]:
    if not records:
        return []
    pending = await Inspection(state).pending_of([r.fingerprint for r in records])
    return [
        DeadRow(
            url=r.url,
            fingerprint=r.fingerprint,
            host=_url_host(r.url) or "",
            reason=r.reason,
            attempts=r.attempts,
            at=r.at,
            referrer=r.referrer,
            detail=r.detail,
            depth=r.depth,
        )
        for r in records
        if r.fingerprint not in pending
    ]


def _url_host(url: str) -> str | None:
    try:
        return host_key(url)
    except ValueError:
        return None


async def replay_celery(
    state: CeleryState,
    store: Store,
    where: DeadFilter,
    scope: Scope | None,
    send: Send | None,
) -> ReplayReport:
    """Replay the matching dead letters of a Celery-engine job (module docstring).

    Args:
        state: The job's Celery-engine state.
        store: The job's store (where its dead letters are).
        where: Which dead letters.
        scope: The job's scope, or None to take every one.
        send: Sends the tasks (`task_sender`); None for a dry run, which changes nothing.

    Raises:
        BrokerUnavailable: The broker refused a task; the URLs made pending before are sent
            again by a waiting ``crawl --engine celery`` of the job (their tasks are lost).
    """
    report = ReplayReport(dry_run=send is None)
    batch: list[tuple[CrawlRequest, str]] = []

    async def flush() -> None:
        if send is None:
            for _, reason in batch:
                report.by_reason[reason] += 1
            report.replayed += len(batch)
        else:
            flags = await Inspection(state).replay([request for request, _ in batch])
            chosen = [(r, why) for (r, why), ok in zip(batch, flags, strict=True) if ok]
            send([request for request, _ in chosen])
            for _, reason in chosen:
                report.by_reason[reason] += 1
            report.replayed += len(chosen)
        batch.clear()

    rows: list[DeadRow] = []
    async for row in celery_dead_rows(state, store, where):
        rows.append(row)
        if len(rows) >= LOOKUP_MAX:
            await _admit(state, rows, scope, report, batch)
            await flush()
            rows = []
    await _admit(state, rows, scope, report, batch)
    await flush()
    return report


async def _admit(
    state: CeleryState,
    rows: list[DeadRow],
    scope: Scope | None,
    report: ReplayReport,
    batch: list[tuple[CrawlRequest, str]],
) -> None:
    kept = await Inspection(state).dead_requests([row.fingerprint for row in rows])
    for row in rows:
        request = kept.get(row.fingerprint)
        if request is None:  # dead before crawlq kept the request: its URL, depth, referrer
            request = CrawlRequest(
                row.url, priority=-row.depth, depth=row.depth, referrer=row.referrer
            )
        if scope is not None and scope.check(request) is not None:
            report.out_of_scope += 1
            continue
        batch.append((request, row.reason))


def task_sender(settings: Settings) -> tuple[Send, Callable[[], None]]:
    """A function sending requests as tasks on the job's broker, and one closing it.

    Raises:
        ConfigError: No broker URL in ``settings``.
    """
    from crawlq.celery.crawl import celery_settings
    from crawlq.celery.tasks import make_app  # imports celery: only when tasks are sent

    settings = celery_settings(settings)
    app = make_app(settings)

    def send(requests: Sequence[CrawlRequest]) -> None:
        for request in requests:
            try:
                app.crawlq.scrape_many.apply_async(
                    args=[settings.job, [Entry(request).to_wire()]],
                    priority=clamp_priority(request.priority),
                )
            except Exception as exc:  # kombu/amqp connection and login errors
                broker = (settings.broker_url or "?").rpartition("@")[2]
                raise BrokerUnavailable(broker, f"{type(exc).__name__}: {exc}"[:300]) from exc

    return send, app.close
