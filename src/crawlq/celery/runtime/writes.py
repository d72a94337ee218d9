"""Writing a Celery task's outcomes, in the order that makes a crash at any point harmless.

1. the store (pages, items, dead letters, filtered records: idempotent by fingerprint);
2. the discovered links through the shared dedup (`CeleryState.admit`), and a task for each
   group of new ones (by host and priority, up to ``celery_batch`` URLs each);
3. retries (a new task per URL, with its backoff as countdown) and politeness re-schedules;
4. the settle (`CeleryState.settle`): only then do the URLs stop being pending.

A Redis at its ``maxmemory`` refuses step 2 only (`crawlq.errors.FrontierFull`): the links are
not followed, counted on their pages' outcomes as ``frontier_full`` (the worker metrics'
``crawlq_links_not_followed_total``, as a scope reason) and in the job's ``frontier_full``
count (by the settle, which runs at ``maxmemory``; ``crawl --engine celery`` reports it), and
logged once a minute (`crawlq.engine.outage.FullFrontier`); the pages are stored and settled
all the same, so the job drains.

The settle also adds each settled URL's run counters to the job's stats (`outcome_counts`:
items stored and dropped by reason, links not followed by reason, retries, dead letters and
filtered URLs by reason) only for the URLs it takes out of
``pending``, so a task delivered again after it settled counts nothing twice;
``crawl --engine celery`` reads them back (`run_counters`) for its summary, as a native
worker counts its own (`crawlq.engine.outcome.WorkerCounters`).

The worker metrics of the outcomes are counted after the store write and the links (a
redirect whose revisit was published counts as a hop, not a page:
`crawlq.engine.outcome.Outcome.revisit`) and before the settle, as the native worker does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from crawlq.celery.runtime.config import clamp_priority
from crawlq.celery.runtime.state import CeleryState
from crawlq.celery.runtime.wire import Entry, Publish, chunks
from crawlq.engine.metrics import recorder
from crawlq.engine.outage import FullFrontier
from crawlq.engine.outcome import Kind, Outcome, WorkerCounters, result_batch, stored_job
from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.store import Store

__all__ = ["outcome_counts", "run_counters", "write_outcomes"]

_NUMBERS = ("items", "retries", "links")
_BY_REASON = ("dead", "filtered", "skipped", "dropped")


def outcome_counts(entry: Entry, outcome: Outcome) -> dict[str, int]:
    r"""The run counters of one settled outcome, as flat fields of the job's stats.

    Counted as `crawlq.engine.outcome.WorkerCounters.count` counts a settled outcome, plus its
    retries (``entry.attempt - 1``: the transient failures before it, each of which sent a
    retry task; counted once the URL settles, so a retry task delivered twice counts once).
    Pages are not here: the crawl counts them in the store.

    Returns:
        ``items``, ``retries``, ``links`` -> count, and ``<counter>\n<reason>`` -> count for
        ``dead``, ``filtered``, ``skipped`` and ``dropped`` (zeros left out; spider errors
        are counted in the store).
    """
    c = WorkerCounters()
    c.count(outcome)
    c.retries = max(0, entry.attempt - 1)
    out = {name: getattr(c, name) for name in _NUMBERS if getattr(c, name)}
    for name in _BY_REASON:
        out.update({f"{name}\n{reason}": n for reason, n in getattr(c, name).items() if n})
    return out


def run_counters(
    now: Mapping[str, int], before: Mapping[str, int], *, pages: WorkerCounters
) -> WorkerCounters:
    """This run's counters: the job's run counters now minus ``before`` (`outcome_counts`).

    Args:
        now: `CeleryState.run_counts` at the end of the run.
        before: The same at its start.
        pages: The counters of what the store gained (pages, spider errors by kind: the
            store's, which a ``reparse`` may change too), completed here and returned.
    """
    for field, n in now.items():
        delta = n - before.get(field, 0)
        name, _, reason = field.partition("\n")
        if delta <= 0:
            continue
        if name in _NUMBERS and not reason:
            setattr(pages, name, getattr(pages, name) + delta)
        elif name in _BY_REASON and reason:
            getattr(pages, name)[reason] += delta
    return pages


async def write_outcomes(
    state: CeleryState,
    store: Store,
    settings: Settings,
    outcomes: list[tuple[Entry, Outcome]],
    later: list[tuple[Entry, float]],
    publish: Publish,
    full: FullFrontier | None = None,
) -> None:
    """Write one task's outcomes in the order of the module docstring, settle last.

    Args:
        state: The job's Redis state.
        store: The job's store.
        settings: The job's settings (``celery_batch``, ``max_pages_per_host``).
        outcomes: Each finished entry with its outcome.
        later: Entries sent back to wait for their host, with the wait in seconds.
        publish: Sends entries as a task.
        full: Counts and logs the links a Redis at its ``maxmemory`` refuses (default: one of
            this call's own).
    """
    done: list[tuple[Entry, Outcome]] = []
    dead: list[tuple[Entry, Outcome]] = []
    answered: set[str] = set()
    retries: list[tuple[Entry, Outcome]] = []
    for entry, o in outcomes:
        if o.kind is Kind.PAGE or o.kind is Kind.FILTERED:
            done.append((entry, o))
            answered.add(entry.request.host)
        elif o.kind is Kind.DEAD:
            dead.append((entry, o))
        elif o.kind is Kind.RETRY:
            retries.append((entry, o))
    batch = result_batch((o for _, o in outcomes), job=stored_job(settings))
    if len(batch):
        await store.write(batch)
    published, refused = await _enqueue_links(
        state, settings, outcomes, publish, full or FullFrontier()
    )
    _count(outcomes, published)  # before the settle, as the native worker does
    for entry, o in retries:
        retry = Entry(entry.request, entry.attempt + 1, retry=True)
        publish([retry], clamp_priority(entry.request.priority), o.retry_delay_s)
        await state.reschedule([entry.request.fingerprint], o.retry_delay_s, retries=1)
    await _send_later(state, settings, later, publish)
    await state.settle(
        [e.request.fingerprint for e, _ in done],
        [e.request.fingerprint for e, _ in dead],
        sorted(answered),
        frontier_full=refused,
        run_counts=[outcome_counts(e, o) for e, o in done + dead],  # after the links' skips
    )


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
            metrics.settled(o, revisited=o.is_hop(published))  # a revisit queued: a hop


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
    full: FullFrontier,
) -> tuple[set[bytes], int]:
    """Admit the outcomes' links (shared dedup) and publish the new ones, by host and band.

    Returns:
        The fingerprints published (new to the job), and how many links a Redis at its
        ``maxmemory`` refused (each counted ``frontier_full`` on its page's outcome too).
    """
    pairs: list[tuple[CrawlRequest, str]] = []
    for entry, o in outcomes:
        owner = entry.request.fingerprint.hex()
        pairs += [(link, owner) for link in o.links]
    if not pairs:
        return set(), 0
    links = [link for link, _ in pairs]
    budget = settings.max_pages_per_host
    flags = await full.attempt(len(links), lambda: state.admit(pairs, run=False, budget=budget))
    if flags is None:  # Redis is full: not followed, counted
        for _, o in outcomes:
            if o.links:
                o.skipped[FullFrontier.reason] += len(o.links)
        return set(), len(links)
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
    return published, 0
