"""A local worker process's side: the owner's frontier and store, as proxies over its socket.

A worker started by an embedded crawl's owner (`crawlq.engine.local_crawl`) connects to the
owner's socket (`OwnerLink`), asks it for its settings (``hello``), and runs the ordinary worker
loop (`crawlq.engine.backends.assembled_worker`) on `RemoteFrontier` and `RemoteStore`: the
frontier and store contracts, each call one round trip to the owner's real backend
(`crawlq.engine.owner_server`). The worker's calls are already batched (a lease call takes
several leases, a flush writes, pushes and acks a batch), so a page costs few round trips.

When the owner goes away (it ended, or was killed with SIGKILL) the socket closes: every call
then raises a permanent error (`crawlq.errors.FrontierError`, `crawlq.errors.StoreError`), so
the worker stops at once instead of riding out an outage; its leases are the owner's file's,
and the next owner of the file requeues them. `LocalWorker` is the process's runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, cast

from crawlq.engine.backends import Backends, assembled_worker
from crawlq.engine.crawl import CrawlReport, WorkerHost
from crawlq.engine.owner_wire import FRONTIER, OWNER, STORE, dumps, frame, loads, raised, read_frame
from crawlq.engine.plan import spider_scope
from crawlq.errors import FrontierError, StoreError
from crawlq.frontier import FrontierStats
from crawlq.frontier.inspection import EVERY_DEAD, DeadFilter, DeadLetter, Replay, UrlState
from crawlq.frontier.queue import Offer, QueueBounds
from crawlq.frontier.robots import RobotsRecord
from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.request import CrawlRequest, Lease
from crawlq.rules.politeness import HostPolicy, Politeness, Strike, StrikePlan
from crawlq.rules.proxies import BenchPlan, ProxyState
from crawlq.spider import load_spider, new_spider
from crawlq.store import ParseUpdate, ResultBatch, StoreCounts, StoredOutcome

__all__ = ["LocalWorker", "OwnerLink", "RemoteFrontier", "RemoteStore"]

logger = logging.getLogger(__name__)

_GONE = "the crawl's owner process is gone"


class OwnerLink:
    """One connection to the owner: concurrent calls, answered by id (`owner_wire`)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._next_id = 0
        self._waiting: dict[int, asyncio.Future[tuple[bool, Any]]] = {}
        self.gone = False
        self._answers = asyncio.create_task(self._read_answers(), name="crawlq-owner-link")

    @classmethod
    async def connect(cls, path: str) -> OwnerLink:
        """Connect to the owner's socket at ``path``.

        Raises:
            FrontierError: Nothing listens there (the owner is gone).
        """
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except OSError as exc:
            raise FrontierError(f"{_GONE}: cannot connect to {path}: {exc}") from exc
        return cls(reader, writer)

    async def call(self, target: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` of the owner's ``target`` and return its result.

        Raises:
            FrontierError, StoreError: The owner is gone (by ``target``), or its backend
                raised a permanent error.
            FrontierUnavailable, StoreUnavailable, ValueError: As the owner's backend raised.
        """
        if self.gone:
            raise self._gone_error(target)
        self._next_id += 1
        call_id = self._next_id
        answer: asyncio.Future[tuple[bool, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = answer
        try:
            self._writer.write(frame(dumps((call_id, target, method, args, kwargs))))
            ok, value = await answer
        finally:
            self._waiting.pop(call_id, None)
        if ok:
            return value
        if value is None:
            raise self._gone_error(target)
        raise raised(value[0], value[1], target)

    def _gone_error(self, target: str) -> Exception:
        return StoreError(_GONE) if target == STORE else FrontierError(_GONE)

    async def _read_answers(self) -> None:
        try:
            while (payload := await read_frame(self._reader)) is not None:
                call_id, ok, value = loads(payload)
                answer = self._waiting.get(call_id)
                if answer is not None and not answer.done():
                    answer.set_result((ok, value))
        except (ConnectionError, ValueError) as exc:
            logger.warning("lost the connection to the crawl's owner: %s", exc)
        finally:
            self.gone = True
            for answer in self._waiting.values():
                if not answer.done():
                    answer.set_result((False, None))

    async def close(self) -> None:
        """Close the connection."""
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()
        self._answers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._answers


def _not_served(what: str) -> FrontierError:
    return FrontierError(f"{what} is not served to a crawl's worker processes")


class RemoteFrontier:
    """The owner's frontier, for the worker loop (`crawlq.frontier.Frontier`).

    The calls of a worker go to the owner (`crawlq.engine.owner_wire.SERVED`); the operator's
    calls (offer, inspection, replay, job settings) are the owner's alone and raise
    `crawlq.errors.FrontierError` here.
    """

    def __init__(self, link: OwnerLink, politeness: Politeness, bounds: QueueBounds) -> None:
        self.link = link
        self.politeness = politeness
        self.bounds = bounds
        self.round_trips = 0

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.round_trips += 1
        return await self.link.call(FRONTIER, method, *args, **kwargs)

    async def push(self, requests: Sequence[CrawlRequest]) -> int:
        """See `crawlq.frontier.queue.WorkQueue.push`."""
        return cast(int, await self._call("push", list(requests)))

    async def offer(self, requests: Sequence[CrawlRequest]) -> Offer:
        """Not served: producers are the owner."""
        raise _not_served("offer")

    async def lease(
        self,
        n: int,
        worker_id: str,
        visibility_timeout_s: float,
        wait_s: float = 0.0,
        *,
        until_drained: bool = False,
        fetched: Sequence[Lease] = (),
    ) -> list[Lease]:
        """See `crawlq.frontier.queue.WorkQueue.lease`."""
        return cast(
            list[Lease],
            await self._call(
                "lease",
                n,
                worker_id,
                visibility_timeout_s,
                wait_s,
                until_drained=until_drained,
                fetched=list(fetched),
            ),
        )

    async def renew(
        self, leases: Sequence[Lease], visibility_timeout_s: float, worker_id: str | None = None
    ) -> list[Lease]:
        """See `crawlq.frontier.queue.WorkQueue.renew`."""
        return cast(
            list[Lease],
            await self._call("renew", list(leases), visibility_timeout_s, worker_id=worker_id),
        )

    async def ack(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.queue.WorkQueue.ack`."""
        return cast(int, await self._call("ack", list(leases))) if leases else 0

    async def retry(self, lease: Lease, delay_s: float, reason: str) -> bool:
        """See `crawlq.frontier.queue.WorkQueue.retry`."""
        return cast(bool, await self._call("retry", lease, delay_s, reason))

    async def dead(self, lease: Lease, reason: str) -> bool:
        """See `crawlq.frontier.queue.WorkQueue.dead`."""
        return cast(bool, await self._call("dead", lease, reason))

    async def release(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.queue.WorkQueue.release`."""
        return cast(int, await self._call("release", list(leases))) if leases else 0

    async def stats(self) -> FrontierStats:
        """See `crawlq.frontier.queue.WorkQueue.stats`."""
        return cast(FrontierStats, await self._call("stats"))

    async def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """See `crawlq.frontier.hosts.HostRules.set_host_policy`."""
        await self._call("set_host_policy", host, policy)

    async def host_strike(self, host: str, strike: Strike, plan: StrikePlan) -> int:
        """See `crawlq.frontier.hosts.HostRules.host_strike`."""
        return cast(int, await self._call("host_strike", host, strike, plan))

    async def proxy_failure(self, proxy_id: str, plan: BenchPlan) -> ProxyState:
        """See `crawlq.frontier.hosts.HostRules.proxy_failure`."""
        return cast(ProxyState, await self._call("proxy_failure", proxy_id, plan))

    async def proxy_ok(self, proxy_id: str) -> None:
        """See `crawlq.frontier.hosts.HostRules.proxy_ok`."""
        await self._call("proxy_ok", proxy_id)

    async def proxy_states(self) -> dict[str, ProxyState]:
        """See `crawlq.frontier.hosts.HostRules.proxy_states`."""
        return cast(dict[str, ProxyState], await self._call("proxy_states"))

    async def robots_get(self, origin: str) -> RobotsRecord | None:
        """See `crawlq.frontier.robots.SharedRobots.robots_get`."""
        return cast(RobotsRecord | None, await self._call("robots_get", origin))

    async def robots_claim(
        self, origin: str, holder: str, ttl_s: float, *, force: bool = False
    ) -> tuple[RobotsRecord | None, bool]:
        """See `crawlq.frontier.robots.SharedRobots.robots_claim`."""
        return cast(
            tuple[RobotsRecord | None, bool],
            await self._call("robots_claim", origin, holder, ttl_s, force=force),
        )

    async def robots_put(self, origin: str, record: RobotsRecord) -> None:
        """See `crawlq.frontier.robots.SharedRobots.robots_put`."""
        await self._call("robots_put", origin, record)

    async def job_settings(self, proposed: dict[str, Any] | None) -> dict[str, Any] | None:
        """Not served: the owner bound the settings this worker was given."""
        raise _not_served("job_settings")

    async def inspect(self, fingerprint: bytes) -> UrlState:
        """Not served: inspection is the owner's."""
        raise _not_served("inspect")

    async def dead_letters(self, where: DeadFilter = EVERY_DEAD) -> AsyncIterator[DeadLetter]:
        """Not served: inspection is the owner's."""
        raise _not_served("dead_letters")
        yield  # pragma: no cover - makes this an async generator

    async def replay_dead(
        self,
        where: DeadFilter = EVERY_DEAD,
        admit: Callable[[DeadLetter], bool] | None = None,
        bounds: QueueBounds | None = None,
    ) -> Replay:
        """Not served: replays are the owner's."""
        raise _not_served("replay_dead")

    async def claim_item_keys(self, keys: Sequence[bytes], owner: bytes) -> list[bool]:
        """See `crawlq.frontier.items.ItemKeys.claim_item_keys`."""
        return cast(list[bool], await self._call("claim_item_keys", list(keys), owner))

    async def close(self) -> None:
        """Nothing to release: the link is closed by its runner."""


def _store_not_served(what: str) -> StoreError:
    return StoreError(f"{what} is not served to a crawl's worker processes")


class RemoteStore:
    """The owner's store, for the worker loop (`crawlq.store.Store`): writes and counts."""

    def __init__(self, link: OwnerLink) -> None:
        self.link = link

    async def write(self, batch: ResultBatch) -> None:
        """See `crawlq.store.Store.write`."""
        if len(batch):
            await self.link.call(STORE, "write", batch)

    async def counts(self, job: str | None = None) -> StoreCounts:
        """See `crawlq.store.Store.counts`."""
        return cast(StoreCounts, await self.link.call(STORE, "counts", job))

    async def replace_parse(self, updates: Sequence[ParseUpdate]) -> frozenset[bytes]:
        """Not served."""
        raise _store_not_served("replace_parse")

    async def pages(
        self,
        *,
        since: float | None = None,
        with_body: bool = False,
        spider_errors_only: bool = False,
        job: str | None = None,
    ) -> AsyncIterator[PageRecord]:
        """Not served."""
        raise _store_not_served("pages")
        yield  # pragma: no cover - makes this an async generator

    async def items(self, *, since: float | None = None) -> AsyncIterator[ItemRecord]:
        """Not served."""
        raise _store_not_served("items")
        yield  # pragma: no cover - makes this an async generator

    async def lookup(self, fingerprints: Sequence[bytes]) -> dict[bytes, StoredOutcome]:
        """Not served."""
        raise _store_not_served("lookup")

    async def dead(self) -> AsyncIterator[DeadRecord]:
        """Not served."""
        raise _store_not_served("dead")
        yield  # pragma: no cover - makes this an async generator

    async def filtered(self) -> AsyncIterator[FilteredRecord]:
        """Not served."""
        raise _store_not_served("filtered")
        yield  # pragma: no cover - makes this an async generator

    async def close(self) -> None:
        """Nothing to release: the link is closed by its runner."""


class LocalWorker(WorkerHost):
    """A worker process of an embedded crawl: the worker loop on the owner's backends.

    Its settings, spider and page budget come from the owner (``hello``), which is this
    command's own parent (same user, same options): code and local paths are this crawl's,
    never a job's. It ends when the frontier is drained, when it is stopped (SIGTERM from the
    owner), or at once when the owner is gone, and reports its counters to the owner.

    Args:
        path: The owner's socket.
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self._stop_asked: bool | None = None

    def stop(self, *, force: bool = False) -> None:
        """Stop the worker (a stop before it runs is applied when it starts)."""
        self._stop_asked = force or bool(self._stop_asked)
        super().stop(force=force)

    async def run(self) -> CrawlReport:
        """Connect, take the settings, work until done or stopped, report to the owner.

        Raises:
            FrontierError: The owner is gone (the worker stopped; the owner's file keeps
                every lease it held, and the next run requeues them).
        """
        self._started = time.monotonic()
        link = await OwnerLink.connect(self.path)
        try:
            hello = await link.call(OWNER, "hello")
            frontier = RemoteFrontier(link, hello["politeness"], hello["bounds"])
            store = RemoteStore(link)
            settings = hello["settings"]
            spider = new_spider(load_spider(settings.spider))
            backends = Backends(frontier, store, settings)
            async with assembled_worker(
                backends,
                spider,
                spider_scope(settings, spider),
                max_pages=hello["max_pages"],
            ) as worker:
                self.worker = worker
                self._frontier = frontier
                if self._stop_asked is not None:
                    worker.stop(force=self._stop_asked)
                try:
                    await worker.run()
                finally:
                    self._frontier = None
                    with contextlib.suppress(FrontierError, StoreError):
                        await link.call(OWNER, "report", worker.counters.as_json())
            return CrawlReport(
                stopped_by=worker.stopped_by or "done",
                counters=worker.counters,
                store=StoreCounts(pages=0, items=0, dead=0, filtered=0),
                frontier=FrontierStats(0, 0, 0, 0, 0, 0),
                elapsed_s=time.monotonic() - self._started,
                seeded=0,
            )
        finally:
            await link.close()
