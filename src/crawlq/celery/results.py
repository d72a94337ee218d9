"""Writing a Celery task's outcomes, in the order that makes a crash at any point harmless.

1. the store (pages, items, dead letters, filtered records: idempotent by fingerprint);
2. the discovered links through the shared dedup (`CeleryState.admit`), and a task for each
   group of new ones (by host and priority, up to ``celery_batch`` URLs each);
3. retries (a new task per URL, with its backoff as countdown) and politeness re-schedules;
4. the settle (`CeleryState.settle`): only then do the URLs stop being pending.

The worker metrics of the outcomes are counted after the store write and the links (a cookie
wall's redirect whose revisit was published counts as a hop, not a page) and before the
settle, as the native worker does.
"""

from __future__ import annotations

from collections import defaultdict

from crawlq.celery.config import clamp_priority
from crawlq.celery.state import CeleryState
from crawlq.celery.wire import Entry, Publish, chunks
from crawlq.engine.metrics import recorder
from crawlq.engine.outcome import Kind, Outcome, result_batch, stored_job
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.store import Store

__all__ = ["write_outcomes"]


async def write_outcomes(
    state: CeleryState,
    store: Store,
    settings: Settings,
    outcomes: list[tuple[Entry, Outcome]],
    later: list[tuple[Entry, float]],
    publish: Publish,
) -> None:
    """Write one task's outcomes in the order of the module docstring, settle last.

    Args:
        state: The job's Redis state.
        store: The job's store.
        settings: The job's settings (``celery_batch``, ``max_pages_per_host``).
        outcomes: Each finished entry with its outcome.
        later: Entries sent back to wait for their host, with the wait in seconds.
        publish: Sends entries as a task.
    """
    done: list[bytes] = []
    dead: list[bytes] = []
    answered: set[str] = set()
    retries: list[tuple[Entry, Outcome]] = []
    for entry, o in outcomes:
        fp = entry.request.fingerprint
        if o.kind is Kind.PAGE or o.kind is Kind.FILTERED:
            done.append(fp)
            answered.add(entry.request.host)
        elif o.kind is Kind.DEAD:
            dead.append(fp)
        elif o.kind is Kind.RETRY:
            retries.append((entry, o))
    batch = result_batch((o for _, o in outcomes), job=stored_job(settings))
    if len(batch):
        await store.write(batch)
    published = await _enqueue_links(state, settings, outcomes, publish)
    _count(outcomes, published)  # before the settle, as the native worker does
    for entry, o in retries:
        retry = Entry(entry.request, entry.attempt + 1, retry=True)
        publish([retry], clamp_priority(entry.request.priority), o.retry_delay_s)
        await state.reschedule([entry.request.fingerprint], o.retry_delay_s)
    if retries:
        await state.add_delayed(len(retries))
    await _send_later(state, settings, later, publish)
    await state.settle(done, dead, sorted(answered))


def _count(outcomes: list[tuple[Entry, Outcome]], published: set[bytes]) -> None:
    """Count each outcome in the process's metrics, when it records them.

    Args:
        outcomes: Each finished entry with its outcome.
        published: The fingerprints this task published (`_enqueue_links`).
    """
    metrics = recorder()
    if metrics is None:
        return
    for _, o in outcomes:
        if o.kind is Kind.RETRY:
            metrics.retried(o.reason)
        else:
            r = o.revisit()  # a cookie wall's redirect whose revisit was queued: a hop
            metrics.settled(o, revisited=r is not None and r.fingerprint in published)


async def _send_later(
    state: CeleryState,
    settings: Settings,
    later: list[tuple[Entry, float]],
    publish: Publish,
) -> None:
    """Publish the entries that wait for their host, one band of priority at a time.

    Each band's tasks (``celery_batch`` entries each) are delayed by the longest wait in it.

    Args:
        state: The job's Redis state (each entry is rescheduled there by its wait).
        settings: The job's settings (``celery_batch``).
        later: Entries sent back to wait for their host, with the wait in seconds.
        publish: Sends entries as a task.
    """
    waiting: dict[int, list[Entry]] = defaultdict(list)
    longest: dict[int, float] = defaultdict(float)
    for entry, wait in later:
        band = clamp_priority(entry.request.priority)
        waiting[band].append(entry)
        longest[band] = max(longest[band], wait)
    for band, group in waiting.items():
        for chunk in chunks(group, settings.celery_batch):
            publish(chunk, band, longest[band])
        await state.reschedule([e.request.fingerprint for e in group], longest[band])


async def _enqueue_links(
    state: CeleryState,
    settings: Settings,
    outcomes: list[tuple[Entry, Outcome]],
    publish: Publish,
) -> set[bytes]:
    """Admit the outcomes' links (shared dedup) and publish the new ones, by host and band.

    Returns:
        The fingerprints published (new to the job).
    """
    pairs: list[tuple[CrawlRequest, str]] = []
    for entry, o in outcomes:
        owner = entry.request.fingerprint.hex()
        pairs += [(link, owner) for link in o.links]
    if not pairs:
        return set()
    links = [link for link, _ in pairs]
    flags = await state.admit(pairs, run=False, budget=settings.max_pages_per_host)
    groups: dict[tuple[str, int], list[Entry]] = defaultdict(list)
    published: set[bytes] = set()
    for link, ok in zip(links, flags, strict=True):
        if ok and link.fingerprint not in published:
            published.add(link.fingerprint)
            groups[(link.host, clamp_priority(link.priority))].append(Entry(link))
    # higher priorities first, so that they reach the queue first within a band too
    for (_, band), group in sorted(groups.items(), key=lambda kv: -kv[0][1]):
        for chunk in chunks(group, settings.celery_batch):
            publish(chunk, band, 0.0)
    return published
