"""What a crawlq task does inside a Celery worker, with no Celery in it.

A task carries one or more URLs of one job (`Entry`). `JobRuntime.run` takes them through
the pipeline both engines share (`crawlq.engine.step.process`: robots.txt, fetch, parse,
decide), then writes in the order that makes a crash at any point harmless:

1. the store (pages, items, dead letters, filtered records: idempotent by fingerprint);
2. the discovered links through the shared dedup (`CeleryState.admit`), and a task for each
   group of new ones (by host and priority, up to ``celery_batch`` URLs each);
3. retries (a new task per URL, with its backoff as countdown) and politeness re-schedules;
4. the settle (`CeleryState.settle`): only then do the URLs stop being pending.

The Celery task is acknowledged after `run` returns; a worker killed before that has its task
delivered again, the URLs are fetched again, and the store's upserts absorb the repeat.

Politeness: before each fetch the host's slot is taken in Redis (`CeleryState.acquire`). A
task whose host is not ready does not wait for it: the URLs it could not start are sent back
as a new task with a countdown until the host's window opens (not counted as an attempt),
which frees the worker slot. While some of its own fetches run, a task waits for one of them
to end before asking again (it holds the slot anyway).

One `Runtimes` per thread owns an asyncio event loop and a `JobRuntime` per job (fetcher,
robots.txt cache, spider, store, Redis connection), built on first use: after the fork in the
prefork pool, and once per thread in the threads pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crawlq.celery.config import clamp_priority, dedup_redis_url
from crawlq.celery.state import CeleryState, Heartbeat, process_id
from crawlq.engine.deps import Deps
from crawlq.engine.job import bind_job
from crawlq.engine.metrics import recorder
from crawlq.engine.outcome import Kind, Outcome, internal_error, result_batch
from crawlq.engine.plan import spider_scope
from crawlq.engine.step import process
from crawlq.errors import ConfigError, FrontierError
from crawlq.fetch import Fetcher
from crawlq.politeness import Politeness
from crawlq.request import CrawlRequest, Lease
from crawlq.robots import RobotsCache
from crawlq.scope import Scope, crawl_domains
from crawlq.settings import Settings
from crawlq.spider import load_spider
from crawlq.store import Store, open_store

__all__ = [
    "MAX_ATTEMPT",
    "MAX_ENTRY_CHARS",
    "BatchReport",
    "Entry",
    "JobRuntime",
    "Publish",
    "Runtimes",
    "parse_entries",
    "unsupported",
]

logger = logging.getLogger(__name__)

POLL_S = 0.1
"""Seconds before a task retries a host whose concurrency is used up by other workers (the
countdown is jittered up to twice this)."""

SLOT_MARGIN_S = 5.0
"""Seconds beyond ``timeout_s`` after which a politeness slot that was never released (its
worker was killed mid-fetch) is freed for other workers."""

MAX_ENTRY_CHARS = 64 * 1024
"""Longest request JSON in a task entry, in characters (as an inbox entry's byte limit)."""

MAX_ATTEMPT = 1000
"""Largest attempt number a task entry may carry."""

SLEEP_UNDER_S = 0.005
"""A host window opening sooner than this many seconds is waited for in the task instead of
a re-schedule through the broker."""


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


@dataclass(slots=True)
class BatchReport:
    """What one task did (for logs and tests).

    Attributes:
        ran: URLs fetched or settled by this task.
        skipped: URLs already settled (a duplicate or repeated delivery).
        pages: Page records written.
        dead: Dead letters written, by reason.
        filtered: Filtered records written.
        retries: Retries scheduled.
        rescheduled: URLs sent back to wait for their host's politeness window.
        enqueued: New discovered URLs enqueued.
    """

    ran: int = 0
    skipped: int = 0
    pages: int = 0
    dead: Counter[str] = field(default_factory=Counter)
    filtered: int = 0
    retries: int = 0
    rescheduled: int = 0
    enqueued: int = 0


class JobRuntime:
    """Everything one worker thread needs to run one job's tasks. Build with `open`."""

    def __init__(
        self, settings: Settings, state: CeleryState, store: Store, deps: Deps, fetcher: Fetcher
    ) -> None:
        self.settings = settings
        self.state = state
        self.store = store
        self.deps = deps
        self.fetcher = fetcher
        self.worker_id = f"{process_id()}:{threading.get_ident()}"
        self._page_host_deps: dict[str, Deps] = {}  # host -> deps whose scope is that host

    @classmethod
    async def open(cls, base: Settings, job: str, *, expect_id: str | None = None) -> JobRuntime:
        """Connect to the job's Redis and store, adopting (or first storing) its settings.

        ``expect_id``: the job id this process joined before (`CeleryState.open`).

        Raises:
            JobGone: ``expect_id`` is given and the job is gone or replaced.
            ConfigError: No Redis for the job's state, or settings that conflict with the
                job's.
            FrontierUnavailable, StoreError: A backend cannot be opened.
        """
        url = dedup_redis_url(base)
        state = await CeleryState.open(url, job, expect_id=expect_id)
        try:
            frontier = state.frontier(Politeness.from_settings(base))
            settings = dataclasses.replace(base, job=job, frontier=url)
            settings = await bind_job(frontier, settings, create=True)
            unsupported(settings)
            frontier.politeness = Politeness.from_settings(settings)  # the job's rules
            store = await open_store(settings.store)
        except BaseException:
            await state.close()
            raise
        s = settings
        fetcher = Fetcher.from_settings(s, max_connections=max(s.concurrency, s.celery_batch))
        spider = load_spider(s.spider)()
        scope = spider_scope(s, spider)
        robots = RobotsCache.from_settings(fetcher, s, frontier) if s.obey_robots else None
        deps = Deps(s, fetcher, robots, spider, scope, frontier, frontier.politeness)
        Heartbeat.of_process(s.heartbeat_s).add(url, job)  # what says this process is alive
        return cls(settings, state, store, deps, fetcher)

    async def close(self) -> None:
        """Close the fetcher, the store and the Redis connection."""
        with contextlib.suppress(Exception):
            await self.fetcher.close()
        with contextlib.suppress(Exception):
            await self.store.close()
        await self.state.close()

    def _deps_for(self, request: CrawlRequest) -> Deps:
        """The job's deps, or with no domains at all, those whose scope is the page's host.

        See `crawlq.scope.crawl_domains`: the page's own host is the seed host of its links.
        """
        if self.deps.scope.allowed_domains:
            return self.deps
        deps = self._page_host_deps.get(request.host)
        if deps is None:
            domains = crawl_domains((), (), (request.host,))
            scope = Scope.from_settings(self.settings, domains)
            deps = self._page_host_deps[request.host] = dataclasses.replace(self.deps, scope=scope)
        return deps

    async def run(self, entries: Sequence[Entry], publish: Publish) -> BatchReport:
        """Run one task's URLs to their outcomes and write them (module docstring).

        Raises:
            FrontierUnavailable, StoreUnavailable: Redis or the store is down; nothing of this
                task is settled, so the caller sends the task again later.
            StoreError: The store refused the results for another reason.
        """
        report = BatchReport()
        rules = self.deps.scope.url_rules  # scrape.delay(url) gets the job's URL rules too
        entries = [dataclasses.replace(e, request=e.request.rewritten(rules)) for e in entries]
        budget = self.settings.max_pages_per_host
        flags = await self.state.admit(
            [(e.request, "task") for e in entries], run=True, budget=budget
        )
        todo = [e for e, ok in zip(entries, flags, strict=True) if ok]
        report.skipped = len(entries) - len(todo)
        retried = sum(1 for e in entries if e.retry)
        if retried:
            await self.state.add_delayed(-retried)
        if not todo:
            return report
        # if this process dies now, its heartbeat goes stale and these URLs are sent again
        await self.state.start_task(self.worker_id, [e.request.fingerprint for e in todo])
        try:
            by_host: dict[str, list[Entry]] = defaultdict(list)
            for entry in todo:
                by_host[entry.request.host].append(entry)
            outcomes: list[tuple[Entry, Outcome]] = []
            later: list[tuple[Entry, float]] = []
            await asyncio.gather(
                *(self._host(host, group, outcomes, later) for host, group in by_host.items())
            )
            await self._write(outcomes, later, publish, report)
        finally:
            with contextlib.suppress(FrontierError):
                await self.state.end_task(self.worker_id)
        return report

    async def _host(
        self,
        host: str,
        entries: list[Entry],
        outcomes: list[tuple[Entry, Outcome]],
        later: list[tuple[Entry, float]],
    ) -> None:
        """Fetch one host's entries as its politeness allows; re-schedule what must wait."""
        queue = deque(entries)
        running: dict[asyncio.Task[Outcome], Entry] = {}
        budget_end = time.monotonic() + self.settings.timeout_s
        hold_s = self.settings.timeout_s + SLOT_MARGIN_S  # one fetch at most per slot
        rules = self.deps.politeness
        policy = rules.configured(host) or rules.default  # Crawl-delay in Redis wins

        metrics = recorder()

        async def one(entry: Entry, token: str) -> Outcome:
            if metrics is not None:
                metrics.in_flight.inc()
            try:
                return await self._process(entry, token)
            finally:
                if metrics is not None:
                    metrics.in_flight.dec()
                with contextlib.suppress(FrontierError):
                    await self.state.release(host, [token])

        def collect(done: set[asyncio.Task[Outcome]]) -> None:
            for task in done:
                entry = running.pop(task)
                outcome = task.result()
                if outcome.kind is Kind.RELEASE:  # robots.txt took the slot: the page waits
                    queue.appendleft(entry)
                    if outcome.links:  # its sitemaps: enqueued with the task's other links
                        outcomes.append((entry, outcome))
                else:
                    outcomes.append((entry, outcome))

        while queue or running:
            if queue:
                grant = await self.state.acquire(
                    host, len(queue), policy, hold_s, holder=self.worker_id
                )
                if grant.down:  # its circuit breaker gave up: dead letters, no request
                    while queue:
                        entry = queue.popleft()
                        lease = Lease("down", entry.request, entry.attempt, self.worker_id, 0, True)
                        outcomes.append((entry, await process(lease, self.deps)))
                    continue
                for token in grant.tokens:
                    entry = queue.popleft()
                    running[asyncio.create_task(one(entry, token))] = entry
                if grant.tokens:
                    continue
                if grant.wait_s is not None and grant.wait_s <= SLEEP_UNDER_S:
                    await asyncio.sleep(grant.wait_s)
                    continue
                if grant.wait_s is None and running and time.monotonic() < budget_end:
                    pass  # our own fetches hold the slots: wait for one below
                else:
                    wait = grant.wait_s
                    if wait is None:
                        wait = POLL_S * (1 + random.random())
                    later.extend((Entry(e.request, e.attempt), wait) for e in queue)
                    queue.clear()
                    continue
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            collect(done)

    async def _process(self, entry: Entry, token: str) -> Outcome:
        req = entry.request
        lease = Lease(token, req, entry.attempt, self.worker_id, 0)
        try:
            return await process(lease, self._deps_for(req))
        except FrontierError as exc:  # a redirect claim could not reach Redis: try again later
            logger.warning("frontier error while processing %s: %s", req.url, exc)
            return Outcome(lease, Kind.RETRY, retry_delay_s=1.0, reason="frontier_unavailable")
        except Exception as exc:
            return internal_error(lease, exc)

    async def _write(
        self,
        outcomes: list[tuple[Entry, Outcome]],
        later: list[tuple[Entry, float]],
        publish: Publish,
        report: BatchReport,
    ) -> None:
        done: list[bytes] = []
        dead: list[bytes] = []
        answered: set[str] = set()
        retries: list[tuple[Entry, Outcome]] = []
        for entry, o in outcomes:
            fp = entry.request.fingerprint
            if o.kind is Kind.PAGE or o.kind is Kind.FILTERED:
                done.append(fp)
                answered.add(entry.request.host)
                report.pages += o.kind is Kind.PAGE
                report.filtered += o.kind is Kind.FILTERED
            elif o.kind is Kind.DEAD:
                dead.append(fp)
                report.dead[o.reason] += 1
            elif o.kind is Kind.RETRY:
                retries.append((entry, o))
        report.ran = len(done) + len(dead)
        batch = result_batch(o for _, o in outcomes)
        if len(batch):
            await self.store.write(batch)
        metrics = recorder()  # counted before the settle, as the native worker does
        if metrics is not None:
            for _, o in outcomes:
                if o.kind is Kind.RETRY:
                    metrics.retried(o.reason)
                else:
                    metrics.settled(o)
        report.enqueued = await self._enqueue_links(outcomes, publish)
        for entry, o in retries:
            retry = Entry(entry.request, entry.attempt + 1, retry=True)
            publish([retry], clamp_priority(entry.request.priority), o.retry_delay_s)
            await self.state.due([entry.request.fingerprint], o.retry_delay_s)
        if retries:
            await self.state.add_delayed(len(retries))
        report.retries = len(retries)
        waiting: dict[int, list[Entry]] = defaultdict(list)
        longest: dict[int, float] = defaultdict(float)
        for entry, wait in later:
            band = clamp_priority(entry.request.priority)
            waiting[band].append(entry)
            longest[band] = max(longest[band], wait)
        for band, group in waiting.items():
            for chunk in _chunks(group, self.settings.celery_batch):
                publish(chunk, band, longest[band])
            await self.state.due([e.request.fingerprint for e in group], longest[band])
        report.rescheduled = len(later)
        await self.state.settle(done, dead, sorted(answered))

    async def _enqueue_links(self, outcomes: list[tuple[Entry, Outcome]], publish: Publish) -> int:
        pairs: list[tuple[CrawlRequest, str]] = []
        for entry, o in outcomes:
            owner = entry.request.fingerprint.hex()
            pairs += [(link, owner) for link in o.links]
        if not pairs:
            return 0
        links = [link for link, _ in pairs]
        flags = await self.state.admit(pairs, run=False, budget=self.settings.max_pages_per_host)
        groups: dict[tuple[str, int], list[Entry]] = defaultdict(list)
        published: set[bytes] = set()
        for link, ok in zip(links, flags, strict=True):
            if ok and link.fingerprint not in published:
                published.add(link.fingerprint)
                groups[(link.host, clamp_priority(link.priority))].append(Entry(link))
        # higher priorities first, so that they reach the queue first within a band too
        for (_, band), group in sorted(groups.items(), key=lambda kv: -kv[0][1]):
            for chunk in _chunks(group, self.settings.celery_batch):
                publish(chunk, band, 0.0)
        return len(published)


def _chunks(entries: list[Entry], size: int) -> list[list[Entry]]:
    return [entries[i : i + size] for i in range(0, len(entries), size)]


class Runtimes:
    """One thread's event loop and its `JobRuntime` per job (see the module docstring).

    Args:
        settings: The worker's settings (from the environment or the app's factory); a job's
            stored settings win for the job-level fields.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[tuple[asyncio.AbstractEventLoop, dict[str, JobRuntime]]] = []
        self._joined: dict[str, str] = {}  # job -> id this process joined: never recreated

    def _mine(self) -> tuple[asyncio.AbstractEventLoop, dict[str, JobRuntime]]:
        mine: tuple[asyncio.AbstractEventLoop, dict[str, JobRuntime]] | None = getattr(
            self._local, "state", None
        )
        if mine is None or mine[0].is_closed():
            mine = (asyncio.new_event_loop(), {})
            self._local.state = mine
            with self._lock:
                self._all.append(mine)
        return mine

    def run(self, job: str, entries: Sequence[Entry], publish: Publish) -> BatchReport:
        """Run one task's entries on this thread's loop (blocking until written).

        A job once joined by this process is never created again: after it is lost (a Redis
        restart without persistence, deleted keys), its tasks raise `crawlq.errors.JobGone`.

        Raises:
            ConfigError, FrontierUnavailable, StoreError, JobGone: See `JobRuntime.open` and
                `JobRuntime.run`.
        """
        loop, jobs = self._mine()
        runtime = jobs.get(job)
        if runtime is None:
            with self._lock:
                expect = self._joined.get(job)
            runtime = loop.run_until_complete(JobRuntime.open(self.settings, job, expect_id=expect))
            jobs[job] = runtime
            if runtime.state.job_id is not None:
                with self._lock:
                    self._joined.setdefault(job, runtime.state.job_id)
        try:
            return loop.run_until_complete(runtime.run(entries, publish))
        except FrontierError:
            # the connection may be broken: open a fresh one for the next task
            jobs.pop(job, None)
            loop.run_until_complete(runtime.close())
            raise

    def close(self) -> None:
        """Close every thread's runtimes and loops (at worker shutdown, from any thread)."""
        with self._lock:
            everything, self._all = self._all, []
        for loop, jobs in everything:
            if loop.is_closed() or loop.is_running():
                continue
            for runtime in jobs.values():
                with contextlib.suppress(Exception):
                    loop.run_until_complete(runtime.close())
            loop.close()


def unsupported(settings: Settings) -> None:
    """Refuse the settings the Celery engine does not implement (yet).

    Raises:
        ConfigError: ``max_pages``, ``warc_dir`` or ``bloom_capacity`` is set; the message
            names it.
    """
    for name in ("max_pages", "warc_dir", "bloom_capacity"):
        if getattr(settings, name, None) is not None:
            raise ConfigError(name, "is not supported by the Celery engine (yet)")


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
