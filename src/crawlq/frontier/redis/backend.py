"""The distributed frontier: a crawl job's queues, leases and seen set in Redis.

Every multi-key step is one Lua script (see the ``.lua`` files beside this module and the key
table in `crawlq.frontier.redis.keys`), so any number of workers on any number of machines
share one consistent frontier. "Now" is the calling worker's clock, passed to every script
(docs/architecture.md: worker clocks are assumed to agree to well under the smallest host delay).

Round trips: a lease is one pipelined read (expired leases, due retries, ready hosts, inbox
length) plus one script; push, ack and the other settles are one script per batch.

Waiting: a worker with nothing to lease registers in ``idle`` and blocks on ``BLMOVE`` of the
job's inbox into its claim list, with a timeout that ends when the next host window opens,
retry falls due or lease expires. Pushes and settles that make a host ready put one empty
wake-up token per idle worker on the inbox; producers' own ``LPUSH`` wakes a worker the same
way. No polling.

Persistence: Redis is the frontier's only copy. Run it with ``appendonly yes`` (AOF) for a
crawl that must survive a Redis restart; without persistence a restart loses the whole
frontier (seen set, queues, leases) — pages already in the store stay there, but the crawl
cannot resume.

Job identity: a job gets a random id when it is created (``job_open.lua``); every process
that joins it reads the id at `RedisFrontier.open` and every script that writes checks it
first (``check_job`` in ``_lib.lua``). After a restart without persistence, or once the job's
keys are deleted, or replaced by a new job of the same name, every write raises
`crawlq.errors.JobGone` and writes nothing: a worker never rebuilds a fragment of a lost job.

Errors: every Redis error goes through `crawlq.frontier.redis.errors.translate`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlq.clock import Clock, SystemClock
from crawlq.errors import ConfigError, FrontierError, InvalidURL, JobGone
from crawlq.frontier.base import (
    EVERY_DEAD,
    DeadFilter,
    DeadLetter,
    FrontierStats,
    HostBackoff,
    HostPolicy,
    HostStats,
    Offer,
    QueueBounds,
    UrlState,
    backoff_state,
)
from crawlq.frontier.lease_wait import check_lease_args, lease_with_wait
from crawlq.frontier.redis.errors import translate
from crawlq.frontier.redis.jobs import PAUSE_POLL_MS
from crawlq.frontier.redis.keys import Keyspace
from crawlq.frontier.redis.scripts import SCRIPTS
from crawlq.politeness import Politeness, Strike, StrikePlan
from crawlq.politeness import rules_with_default as _rules
from crawlq.request import CrawlRequest, Lease
from crawlq.robots_record import MAX_RECORD_BYTES, MAX_TTL_MS, RobotsRecord
from crawlq.secrecy import loggable_entry

__all__ = ["INBOX_MAX_ENTRY_BYTES", "BloomDedup", "InboxFilter", "RedisFrontier"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_PRIORITY_LIMIT = 2**19 - 1  # scores are -priority * 2**33 + sequence, exact below 2**53
_PUSH_CHUNK = 500
_MAX_URL_LENGTH = 2083  # as for seeds and links (crawlq.scope.MAX_URL_LENGTH)
_MAX_CANDIDATE_HOSTS = 512
_MAX_WAIT_S = 10.0
_FULL_INBOX_POLL_S = 1.0  # how often a worker looks for room for waiting inbox entries
_STALE_WORKER_MS = 60_000
_RECOVER_EVERY_S = 30.0
_MAX_REASON_CHARS = 500
_REJECTED_PREFIX_BYTES = 1024

INBOX_MAX_ENTRY_BYTES = 64 * 1024
"""Default largest inbox entry, in bytes (`RedisFrontier.inbox_max_entry_bytes`)."""

InboxFilter = Callable[[CrawlRequest], CrawlRequest | str]
"""Decides whether an inbox request may be queued: the request to queue (the job's URL rules
may rewrite it), or the reason to reject it."""


@dataclass(frozen=True, slots=True)
class BloomDedup:
    """Dedup with a Bloom filter instead of an exact set, for very large crawls.

    A Bloom filter of ``m`` bits with ``k`` hash positions per URL answers "seen" for a URL
    never pushed with probability ``error_rate`` once ``capacity`` URLs are in it (and more
    beyond that): such a URL is then silently skipped. Memory is ``m / 8`` bytes whatever the
    crawl size: 1.2 MB per million URLs at 1 %, 1.8 MB at 0.1 %, against 64 MB per million
    for the exact set of 20-byte fingerprints (measured with MEMORY USAGE on Redis 7.0).

    Attributes:
        capacity: URLs the filter is sized for.
        error_rate: False-positive probability at ``capacity`` (0 < p < 1).
    """

    capacity: int = 100_000_000
    error_rate: float = 0.001

    def __post_init__(self) -> None:
        if self.capacity < 1 or not 0 < self.error_rate < 1:
            raise ConfigError("bloom", f"need capacity >= 1 and 0 < error_rate < 1, got {self}")
        if self.bits > 2**32:
            raise ConfigError("bloom", f"{self.bits} bits exceed a Redis string (2**32)")

    @property
    def bits(self) -> int:
        """Filter size ``m`` in bits: ``-n ln p / (ln 2)^2``."""
        return math.ceil(-self.capacity * math.log(self.error_rate) / math.log(2) ** 2)

    @property
    def hashes(self) -> int:
        """Positions per URL ``k``: ``(m / n) ln 2``."""
        return max(1, round(self.bits / self.capacity * math.log(2)))

    def positions(self, fp: bytes) -> list[int]:
        """The ``k`` bit positions of a fingerprint (double hashing over its SHA-1 bytes)."""
        h1 = int.from_bytes(fp[:8], "big")
        h2 = int.from_bytes(fp[8:16], "big") | 1
        m = self.bits
        return [(h1 + i * h2) % m for i in range(self.hashes)]

    def spec(self) -> str:
        """How the job records it: ``bloom capacity error_rate``."""
        return f"bloom {self.capacity} {self.error_rate!r}"


class RedisFrontier:
    """`crawlq.frontier.base.Frontier` on Redis, shared by every worker of a job.

    Create with `RedisFrontier.open`. The methods' semantics are the contract's; the notes
    here are what Redis adds.

    Args:
        client: A ``redis.asyncio.Redis`` with ``decode_responses=False``.
        job: The job name; all keys live under ``crawlq:{job}:``.
        politeness: The job's host politeness rules.
        clock: Source of "now".
        bloom: Bloom-filter dedup settings, or None for the exact set.
        job_id: The id of the job this client joined (`join_job`); None when it joined none
            (the job did not exist): every write then raises `crawlq.errors.JobGone`.
    """

    def __init__(
        self,
        client: Redis,
        job: str,
        politeness: Politeness,
        clock: Clock | None = None,
        bloom: BloomDedup | None = None,
        job_id: str | None = None,
    ) -> None:
        self.client = client
        self.keys = Keyspace(job)
        self.job = job
        self.job_id = job_id
        self.politeness = politeness
        self.round_trips = 0
        self.clock: Clock = clock or SystemClock()
        self.bloom = bloom
        self._claim_pending: set[str] = set()
        self._last_recover = 0.0
        self._robots_warned: set[str] = set()
        self.inbox_filter: InboxFilter | None = None
        """Checks each inbox request before it is queued (method, scope): set by the engine,
        which knows the job's rules; None queues every valid request."""
        self.inbox_full = False
        """The last inbox drain found the job at its ``block`` bound and took nothing."""
        self.bounds = QueueBounds()
        """The job's queue bounds (`crawlq.frontier.base.QueueBounds`)."""
        self.paused = False
        """The job was paused at this frontier's last lease (`crawlq.frontier.redis.jobs`)."""
        self.inbox_max_entry_bytes = INBOX_MAX_ENTRY_BYTES
        """Largest inbox entry accepted, in bytes; a larger one is rejected unread."""

    @classmethod
    async def open(
        cls,
        url: str,
        job: str,
        *,
        default_policy: HostPolicy | None = None,
        politeness: Politeness | None = None,
        clock: Clock | None = None,
        bloom: BloomDedup | None = None,
        create: bool = False,
    ) -> RedisFrontier:
        """Connect to ``url`` (``redis://[:password@]host:port/db`` or ``rediss://``).

        The job's dedup mode is fixed when the job is created (``create``, by its first seed
        or crawl, which also gives it its random id); everyone else adopts it, and joins the
        job's id: writes check it (module docstring). Opening does not write anything unless
        ``create`` is set (or the job exists without an id: it gets one), so a worker or a
        status query of a job that was never seeded leaves no trace.

        Raises:
            FrontierUnavailable: The server cannot be reached.
            ConfigError: A bad URL or job name, or ``bloom`` disagrees with the job's mode.
        """
        try:
            parts = urlsplit(url)
            hostname = parts.hostname
        except ValueError as exc:  # e.g. an unclosed "[" of an IPv6 address
            raise ConfigError("frontier", f"bad Redis URL {url!r}: {exc}") from None
        db = parts.path.lstrip("/")
        if parts.scheme in ("redis", "rediss") and (not hostname or (not db.isdigit() and db)):
            raise ConfigError("frontier", f"bad Redis URL {url!r}: want redis://host:port/DB")
        try:
            client = Redis.from_url(url, decode_responses=False, health_check_interval=10)
            keys = Keyspace(job)
        except ValueError as exc:
            raise ConfigError("frontier", f"bad Redis URL or job {url!r} {job!r}: {exc}") from exc
        self = cls(client, job, _rules(politeness, default_policy), clock, bloom)
        self.keys = keys
        try:
            wanted = (bloom.spec() if bloom else "set").encode()
            try:
                self.job_id, actual = await self._join(create, wanted)
            except TypeError as exc:  # redis-py: an unknown ?option= of the URL
                raise ConfigError("frontier", f"bad Redis URL {url!r}: {exc}") from None
            if actual is not None and actual != wanted:
                have = actual.decode() if isinstance(actual, bytes) else str(actual)
                if bloom is not None or not have.startswith("bloom "):
                    raise ConfigError(
                        "bloom", f"job {job!r} dedups with {have}, not {wanted.decode()}"
                    )
                _, capacity, rate = have.split()
                self.bloom = BloomDedup(int(capacity), float(rate))  # adopt the job's mode
        except BaseException:
            await client.aclose()
            raise
        return self

    async def _join(self, create: bool, dedup: bytes) -> tuple[str | None, bytes | None]:
        """Read the job's id and dedup mode (``job_open.lua``), creating the job if asked."""
        args = ["1" if create else "0", secrets.token_hex(8), dedup]
        job_id, actual = await self._script("job_open", [self.keys.job_info], args)
        return (None if job_id is None else _text(job_id)), actual

    # -- plumbing -------------------------------------------------------------------------

    async def _call(self, op: Callable[[], Awaitable[_T]]) -> _T:
        """Run one Redis operation; a Redis error becomes a crawlq error (`translate`)."""
        self.round_trips += 1
        try:
            return await op()
        except (RedisError, OSError) as exc:
            raise translate(exc, self.job, self.job_id) from exc

    async def _script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        job = (self.keys.job_info, self.job_id or "")
        return await self._call(lambda: SCRIPTS[name].run(self.client, keys, args, job))

    def _dedup_args(self) -> tuple[str, str, int]:
        if self.bloom is None:
            return self.keys.seen, "set", 0
        return self.keys.bloom, "bloom", self.bloom.hashes

    def _policy_args(self) -> tuple[int, int]:
        return round(self.politeness.default.delay_s * 1000), self.politeness.default.concurrency

    # -- push and claim -------------------------------------------------------------------

    async def push(self, requests: Sequence[CrawlRequest]) -> int:
        """See `crawlq.frontier.base.Frontier.push`. Sent in chunks of 500 per script call."""
        added = 0
        for start in range(0, len(requests), _PUSH_CHUNK):
            added += (await self._push(requests[start : start + _PUSH_CHUNK], None)).queued
        return added

    async def offer(self, requests: Sequence[CrawlRequest]) -> Offer:
        """See `crawlq.frontier.base.Frontier.offer`."""
        queued = refused = dropped = 0
        for start in range(0, len(requests), _PUSH_CHUNK):
            got = await self._push(requests[start : start + _PUSH_CHUNK], None, producer=True)
            queued, refused, dropped = (
                queued + got.queued,
                refused + got.refused,
                dropped + got.dropped,
            )
        return Offer(queued, refused, dropped)

    async def _push(
        self, requests: Sequence[CrawlRequest], claim_of: str | None, *, producer: bool = False
    ) -> Offer:
        k = self.keys
        seen_key, mode, nbits = self._dedup_args()
        hosts: dict[str, int] = {}
        body: list[Any] = []
        for req in requests:
            hidx = hosts.setdefault(req.host, len(hosts) + 1)
            priority = max(-_PRIORITY_LIMIT, min(_PRIORITY_LIMIT, req.priority))
            body += [req.fingerprint, hidx, priority, f"{req.host}\n{req.to_json()}"]
            if self.bloom is not None:
                body += self.bloom.positions(req.fingerprint)
        ddelay, dconc = self._policy_args()
        b = self.bounds
        args = [
            self.clock.wall_ms(), ddelay, dconc, mode, nbits, "1" if claim_of else "0",
            b.max_queued or 0, b.max_queued_per_host or 0,
            "drop" if b.when_full == "drop-lowest" else "block", "1" if producer else "0",
        ]  # fmt: skip
        overrides: list[Any] = []
        for host, hidx in hosts.items():
            policy = self.politeness.configured(host)
            if policy is not None:
                overrides += [hidx, round(policy.delay_s * 1000), policy.concurrency]
        budget = self.politeness.max_pages_per_host
        args += [len(hosts), *hosts, len(overrides) // 3, *overrides]
        args += [-1 if budget is None else budget, *body]
        keys = [
            seen_key, k.reqs, k.scores, k.stats, k.ready, k.inflight, k.next, k.policy,
            k.inbox, k.idle, k.claim(claim_of or "-"), k.admitted,
            *(k.queue(h) for h in hosts), k.dead, k.dead_at,
        ]  # fmt: skip
        queued, refused, dropped = await self._script("push", keys, args)
        if dropped:
            logger.warning(
                "job %s: frontier full, %d request(s) dead-lettered as frontier_full",
                self.job,
                dropped,
            )
        return Offer(int(queued), int(refused), int(dropped))

    # -- lease ----------------------------------------------------------------------------

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
        """See `crawlq.frontier.base.Frontier.lease`.

        Also requeues expired leases and due retries of every worker, and drains the inbox.
        """
        vt_ms = check_lease_args(n, visibility_timeout_s)

        async def try_lease(done: Sequence[Lease]) -> tuple[list[Lease], int | None]:
            return await self._lease_once(n, worker_id, vt_ms, done)

        async def sleep(timeout_s: float, pending: bool) -> None:
            await self._wait(worker_id, timeout_s, pending=pending)

        return await lease_with_wait(
            try_lease,
            sleep,
            self.clock,
            wait_s=wait_s,
            until_drained=until_drained,
            fetched=fetched,
            max_sleep_s=_MAX_WAIT_S,
        )

    async def _lease_once(
        self, n: int, worker_id: str, vt_ms: int, fetched: Sequence[Lease]
    ) -> tuple[list[Lease], int | None]:
        k = self.keys
        now = self.clock.wall_ms()
        n_hosts = min(_MAX_CANDIDATE_HOSTS, max(64, 2 * n))

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.zrangebyscore(k.leases, "-inf", now, start=0, num=256)
                pipe.zrangebyscore(k.delayed, "-inf", now, start=0, num=256)
                pipe.llen(k.inbox)
                pipe.zrangebyscore(k.ready, "-inf", now, start=0, num=n_hosts)
                return await pipe.execute()

        expired, due, inbox_len, ready = await self._call(read)
        if expired or due or inbox_len or worker_id in self._claim_pending:
            if expired:
                moved = await self._requeue("reap", k.leases, expired, now)
                if moved:
                    logger.warning("requeued %d expired leases of dead or stalled workers", moved)
            if due:
                await self._requeue("promote", k.delayed, due, now)
            if inbox_len or worker_id in self._claim_pending:
                await self.drain_inbox(worker_id)
            ready = await self._call(
                lambda: self.client.zrangebyscore(k.ready, "-inf", now, start=0, num=n_hosts)
            )
        if ready or fetched:
            leases = await self._lease_script(n, worker_id, vt_ms, now, ready, fetched)
            if leases:
                return leases, None
            if self.paused:  # look again after a while (resume also wakes idle workers)
                return [], now + PAUSE_POLL_MS
        return [], await self._next_wake_ms()

    async def _lease_script(
        self,
        n: int,
        worker_id: str,
        vt_ms: int,
        now: int,
        ready: list[bytes],
        fetched: Sequence[Lease],
    ) -> list[Lease]:
        k = self.keys
        index = {h.decode(): i for i, h in enumerate(ready, 1)}
        done: list[Any] = []
        for lease in fetched:  # their hosts join the candidates: a freed slot may open one
            host = lease.request.host
            done += [
                lease.request.fingerprint,
                lease.lease_id,
                index.setdefault(host, len(index) + 1),
            ]
        hosts = list(index)
        ddelay, dconc = self._policy_args()
        keys = [
            k.ready, k.reqs, k.attempts, k.leases, k.owner, k.inflight, k.next, k.policy,
            k.stats, k.inbox, k.idle, *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        args = [now, n, vt_ms, worker_id, ddelay, dconc, len(hosts), *hosts, len(fetched), *done]
        flat = await self._script("lease", keys, args)
        paused = flat == [b"paused"]
        if paused != self.paused:
            self.paused = paused
            if paused:
                logger.warning(
                    "job %s is paused: leasing nothing until `crawlq job resume %s`",
                    self.job,
                    self.job,
                )
            else:
                logger.warning("job %s resumed", self.job)
        if paused:
            return []
        leases = []
        for i in range(0, len(flat), 5):
            _, lease_id, attempt, value, down = flat[i : i + 5]
            _, _, text = value.partition(b"\n")
            leases.append(
                Lease(
                    lease_id=lease_id.decode(),
                    request=CrawlRequest.from_json(text),
                    attempt=int(attempt),
                    worker_id=worker_id,
                    deadline_ms=now + vt_ms,
                    host_down=down == b"1",
                )
            )
        return leases

    async def _requeue(self, mode: str, source: str, members: list[bytes], now: int) -> int:
        k = self.keys
        hosts: dict[str, int] = {}
        body: list[Any] = []
        for member in members:
            host = member[20:].decode()
            body += [member, hosts.setdefault(host, len(hosts) + 1)]
        keys = [
            source, k.owner, k.inflight, k.next, k.policy, k.ready, k.stats, k.scores,
            k.inbox, k.idle, *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        args = [now, mode, self.politeness.default.concurrency, len(hosts), *hosts, *body]
        return int(await self._script("requeue", keys, args))

    async def _next_wake_ms(self) -> int | None:
        k = self.keys

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for key in (k.ready, k.delayed, k.leases):
                    pipe.zrange(key, 0, 0, withscores=True)
                return await pipe.execute()

        firsts = await self._call(read)
        times = [int(first[0][1]) for first in firsts if first]
        return min(times) if times else None

    async def _wait(self, worker_id: str, timeout_s: float, *, pending: bool) -> None:
        """Block until a wake-up token or a producer's entry arrives, or ``timeout_s`` passes.

        ``pending``: the caller's last look saw work in flight or delayed. If that work was
        settled before this worker registered as idle (so no token was left for it) and the
        job is now drained, return at once instead of sleeping out the timeout. While the job
        is paused, ready hosts do not shorten the wait.
        """
        k = self.keys
        now = self.clock.wall_ms()

        # Register as idle first, then look once more: a settle or push that ran before the
        # registration is visible to this look, and one after it leaves a token.
        keys = [k.idle, k.ready, k.inbox, k.leases, k.delayed]
        first_ready, inbox_len, leased, delayed = await self._script("idle", keys, [now, worker_id])
        if self.paused:  # ready hosts wait for `crawlq job resume`, which leaves tokens
            first_ready = pending = False
        if first_ready:  # a settle that ran just before may have made a host ready soon
            timeout_s = min(timeout_s, (int(first_ready) - now) / 1000)
        drained_since = pending and not (first_ready or leased or delayed)
        if inbox_len and self.inbox_full:  # entries wait for room: look again in a while
            await self._call(lambda: self.client.zrem(k.idle, worker_id))
            await asyncio.sleep(max(0.0, min(timeout_s, _FULL_INBOX_POLL_S)))
            return
        if timeout_s <= 0 or inbox_len or drained_since:
            await self._call(lambda: self.client.zrem(k.idle, worker_id))
            return
        if timeout_s < 0.25:
            # Redis times blocking commands out on its 100 ms clock (hz 10): a short
            # politeness wait is slept here instead, exactly.
            await self._call(lambda: self.client.zrem(k.idle, worker_id))
            await asyncio.sleep(timeout_s)
            return
        try:
            got = await self._call(
                lambda: self.client.blmove(
                    k.inbox,
                    k.claim(worker_id),
                    max(0.01, timeout_s - 0.1),  # type: ignore[arg-type]  # hz 10 rounds up
                    "RIGHT",
                    "RIGHT",
                )
            )
            if got is not None:
                self._claim_pending.add(worker_id)
        finally:
            with contextlib.suppress(FrontierError):
                await self._call(lambda: self.client.zrem(k.idle, worker_id))

    # -- the inbox ------------------------------------------------------------------------

    async def drain_inbox(self, worker_id: str, n: int = 1000) -> int:
        """Move up to ``n`` producer entries from the inbox into the frontier (with dedup).

        Entries are plain URLs or JSON requests (`CrawlRequest.to_json`); empty entries are
        wake-up tokens. Every other entry, whatever its bytes, ends as a queued request or
        as a record on the job's ``rejected`` list with the reason (see `_rejection`), and
        is logged: larger than `inbox_max_entry_bytes`, not UTF-8, not a valid request
        (`CrawlRequest.from_json` checks types, ranges and nesting), or refused by
        `inbox_filter` (method, scope). An entry can make nothing here raise but the
        frontier's own errors, so it never stops a worker or strands the entries claimed
        with it.

        Returns:
            How many new requests were queued.
        """
        k = self.keys
        room = await self._inbox_room()
        self.inbox_full = room == 0
        if self.inbox_full:
            return 0  # a "block" bound: the entries wait in the inbox (see QueueBounds)
        if room is not None:
            n = min(n, room)
        entries = await self._script("drain_inbox", [k.inbox, k.claim(worker_id)], [n])
        self._claim_pending.discard(worker_id)
        if not entries:
            return 0
        requests: list[CrawlRequest] = []
        rejected: list[str] = []
        for raw in entries:
            raw = bytes(raw)
            if not raw.strip():
                continue
            try:
                requests.append(self._inbox_request(raw))
            except FrontierError:
                raise
            except Exception as exc:  # an entry is untrusted: whatever it raises rejects it
                reason = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
                reason = reason[:_MAX_REASON_CHARS]
                shown = loggable_entry(raw)
                logger.warning("rejected inbox entry %s of job %s: %s", shown, self.job, reason)
                rejected.append(self._rejection(raw, reason))
        if rejected:
            await self._call(lambda: self.client.lpush(k.rejected, *rejected))
        added = 0
        for start in range(0, max(1, len(requests)), _PUSH_CHUNK):
            chunk = requests[start : start + _PUSH_CHUNK]
            last = start + _PUSH_CHUNK >= len(requests)
            added += (await self._push(chunk, worker_id if last else None)).queued
        return added

    async def _inbox_room(self) -> int | None:
        """Requests the inbox may still add under a ``block`` job bound, or None (no bound)."""
        b = self.bounds
        if b.when_full != "block" or b.max_queued is None:
            return None
        queued = await self._call(lambda: self.client.hget(self.keys.stats, "queued"))
        return max(0, b.max_queued - int(queued or 0))

    def _inbox_request(self, raw: bytes) -> CrawlRequest:
        """The request an inbox entry asks for.

        Raises:
            ValueError: The entry is too large, not UTF-8, not a valid request, or refused by
                `inbox_filter` (the message is the reason); anything else a malformed entry
                may raise while it is parsed.
        """
        if len(raw) > self.inbox_max_entry_bytes:
            raise ValueError(
                f"entry_too_large: {len(raw)} bytes (the limit is {self.inbox_max_entry_bytes})"
            )
        text = raw.decode("utf-8").strip()  # UnicodeDecodeError is a ValueError
        request = CrawlRequest.from_json(text) if text.startswith("{") else CrawlRequest(text)
        if len(request.url) > _MAX_URL_LENGTH:
            raise InvalidURL(request.url[:100] + "…", "longer than 2083 characters")
        if self.inbox_filter is not None:
            verdict = self.inbox_filter(request)
            if isinstance(verdict, str):
                raise ValueError(verdict)
            request = verdict
        return request

    def _rejection(self, raw: bytes, reason: str) -> str:
        """The ``rejected`` record of an entry: JSON with ``entry``, ``reason`` and ``size``.

        ``entry`` is the entry as text when it is UTF-8, else its base64 with
        ``"encoding": "base64"`` (lossless either way). An entry over
        `inbox_max_entry_bytes` keeps only its first `_REJECTED_PREFIX_BYTES` (1 KiB), with
        ``"truncated": true``; ``size`` is always the whole entry's, in bytes.
        """
        record: dict[str, Any] = {"reason": reason, "size": len(raw)}
        kept = raw
        if len(raw) > self.inbox_max_entry_bytes:
            kept = raw[:_REJECTED_PREFIX_BYTES]
            record["truncated"] = True
        try:
            record["entry"] = kept.decode("utf-8")
        except UnicodeDecodeError:
            record["entry"] = base64.b64encode(kept).decode("ascii")
            record["encoding"] = "base64"
        return json.dumps(record)

    # -- settling leases ------------------------------------------------------------------

    async def renew(
        self, leases: Sequence[Lease], visibility_timeout_s: float, worker_id: str | None = None
    ) -> list[Lease]:
        """See `crawlq.frontier.base.Frontier.renew`.

        Also records the worker's heartbeat (``workers``) and, every 30 s, returns dead
        workers' inbox claims to the inbox.
        """
        k = self.keys
        now = self.clock.wall_ms()
        deadline = now + round(visibility_timeout_s * 1000)
        who = worker_id or (leases[0].worker_id if leases else "-")
        args: list[Any] = [deadline, who, now]
        for lease in leases:
            fp = lease.request.fingerprint
            args += [fp + lease.request.host.encode(), fp, lease.lease_id]
        flags = await self._script("renew", [k.leases, k.owner, k.workers], args)
        if time.monotonic() - self._last_recover > _RECOVER_EVERY_S:
            self._last_recover = time.monotonic()
            await self._recover_claims(now)
        return [
            Lease(lease.lease_id, lease.request, lease.attempt, lease.worker_id, deadline)
            for lease, ok in zip(leases, flags, strict=True)
            if ok
        ]

    async def _recover_claims(self, now: int) -> None:
        k = self.keys
        prefix = k.claim("")

        async def scan() -> list[str]:
            match = k.pattern()[:-1] + "claim:*"
            return [
                key.decode()[len(prefix) :]
                async for key in self.client.scan_iter(match=match, count=500)
            ]

        workers = await self._call(scan)
        if workers:
            keys = [k.workers, k.inbox, *(k.claim(w) for w in workers)]
            moved = await self._script("recover_claims", keys, [now, _STALE_WORKER_MS, *workers])
            if moved:
                logger.warning("returned %d inbox entries of dead workers to the inbox", moved)
        await self._call(lambda: self.client.zremrangebyscore(k.idle, "-inf", now - 60_000))

    async def ack(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.base.Frontier.ack`."""
        return await self._settle("ack", [(lease, "") for lease in leases])

    async def retry(self, lease: Lease, delay_s: float, reason: str) -> bool:
        """See `crawlq.frontier.base.Frontier.retry`."""
        if delay_s < 0:
            raise ValueError(f"delay_s must not be negative, got {delay_s}")
        due = self.clock.wall_ms() + round(delay_s * 1000)
        return await self._settle("retry", [(lease, f"{due} {reason}")]) == 1

    async def dead(self, lease: Lease, reason: str) -> bool:
        """See `crawlq.frontier.base.Frontier.dead`."""
        return await self._settle("dead", [(lease, reason)]) == 1

    async def release(self, leases: Sequence[Lease]) -> int:
        """See `crawlq.frontier.base.Frontier.release`."""
        return await self._settle("release", [(lease, "") for lease in leases])

    async def _settle(self, mode: str, items: Sequence[tuple[Lease, str]]) -> int:
        if not items:
            return 0
        k = self.keys
        hosts: dict[str, int] = {}
        body: list[Any] = []
        for lease, extra in items:
            req = lease.request
            body += [req.fingerprint, lease.lease_id, hosts.setdefault(req.host, len(hosts) + 1)]
            body.append(extra)
        keys = [
            k.leases, k.owner, k.inflight, k.next, k.policy, k.ready, k.stats, k.reqs,
            k.scores, k.attempts, k.delayed, k.dead, k.rate, k.inbox, k.idle, k.strikes,
            k.last_error, k.dead_at, *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        args = [self.clock.wall_ms(), mode, self.politeness.default.concurrency, len(hosts)]
        return int(await self._script("settle", keys, [*args, *hosts, *body]))

    # -- looking at one URL, and at the dead letters ---------------------------------------

    async def inspect(self, fingerprint: bytes) -> UrlState:
        """See `crawlq.frontier.base.Frontier.inspect`: one read-only script (``inspect.lua``).

        With Bloom-filter dedup, ``done`` is what the filter says (`UrlState.exact` False).

        Raises:
            JobGone: The job this client joined is gone or was replaced.
        """
        k = self.keys
        fp = bytes(fingerprint)
        seen_key, mode, _ = self._dedup_args()
        bits = self.bloom.positions(fp) if self.bloom is not None else []
        keys = [
            k.job_info, seen_key, k.reqs, k.dead, k.attempts, k.owner, k.leases, k.delayed,
            k.next, k.last_error, k.dead_at,
        ]  # fmt: skip
        got = await self._call(lambda: SCRIPTS["inspect"].run(self.client, keys, [fp, mode, *bits]))
        job_id, seen, value, dead, attempts, owner, deadline, due, next_at, error, dead_at = got
        found = None if job_id is None else _text(job_id)
        if self.job_id is not None and found != self.job_id:
            raise JobGone(self.job, self.job_id, found)
        tries = _int(attempts)
        if dead is not None:
            reason, _, rest = bytes(dead).partition(b"\n")
            return UrlState(
                fp,
                "dead",
                request=_request(rest.partition(b"\n")[2]),
                attempts=tries,
                reason=_text(reason),
                dead_at_ms=_int(dead_at),
            )
        if value is not None:
            request = _request(bytes(value).partition(b"\n")[2])
            last = None if error is None else _text(error)
            if owner is not None:
                worker = _text(owner).rstrip("\n").partition(" ")[2]
                return UrlState(
                    fp,
                    "in_flight",
                    request=request,
                    attempts=tries,
                    worker_id=worker or None,
                    deadline_ms=_int(deadline),
                    reason=last,
                )
            if due is not None:
                return UrlState(
                    fp, "delayed", request=request, attempts=tries, ready_at_ms=_int(due),
                    reason=last,
                )  # fmt: skip
            return UrlState(
                fp, "queued", request=request, attempts=tries or 0,
                ready_at_ms=_int(next_at) or 0, reason=last,
            )  # fmt: skip
        if int(seen):
            return UrlState(fp, "done", exact=self.bloom is None)
        return UrlState(fp, "unseen")

    async def dead_letters(self, where: DeadFilter = EVERY_DEAD) -> AsyncIterator[DeadLetter]:
        """See `crawlq.frontier.base.Frontier.dead_letters`. ``HSCAN`` of the dead letters."""
        async for chunk in self._dead_chunks(where):
            for _, letter in chunk:
                yield letter

    async def _dead_chunks(
        self, where: DeadFilter
    ) -> AsyncIterator[list[tuple[bytes, DeadLetter]]]:
        """The matching dead letters, by fingerprint, one ``HSCAN`` chunk at a time."""
        k = self.keys
        cursor = 0
        while True:

            async def scan(at: int = cursor) -> tuple[int, dict[bytes, bytes], list[Any]]:
                nxt, found = await self.client.hscan(k.dead, at, count=500)
                fps = list(found)
                if not fps:
                    return int(nxt), {}, []
                async with self.client.pipeline(transaction=False) as pipe:
                    pipe.hmget(k.attempts, fps)
                    pipe.hmget(k.dead_at, fps)
                    extra = await pipe.execute()
                return int(nxt), dict(found), list(zip(*extra, strict=True))  # type: ignore[arg-type]

            cursor, found, extra = await self._call(scan)
            chunk: list[tuple[bytes, DeadLetter]] = []
            for (fp, value), (attempts, dead_at) in zip(found.items(), extra, strict=True):
                letter = self._dead_letter(bytes(fp), bytes(value), attempts, dead_at)
                if letter is not None and where.matches(
                    letter.request.host, letter.reason, letter.dead_at_ms
                ):
                    chunk.append((bytes(fp), letter))
            if chunk:
                yield chunk
            if cursor == 0:
                return

    def _dead_letter(
        self, fp: bytes, value: bytes, attempts: Any, dead_at: Any
    ) -> DeadLetter | None:
        r"""A ``dead`` hash value (``reason "\n" host "\n" request JSON``), or None if garbled."""
        reason, _, rest = value.partition(b"\n")
        try:
            request = CrawlRequest.from_json(rest.partition(b"\n")[2])
        except ValueError as exc:  # shared state: whoever can write the key may write anything
            logger.warning(
                "skipping unreadable dead letter %s of job %s: %s", fp.hex(), self.job, exc
            )
            return None
        return DeadLetter(request, _text(reason), _int(attempts), _int(dead_at))

    async def replay_dead(
        self,
        where: DeadFilter = EVERY_DEAD,
        admit: Callable[[DeadLetter], bool] | None = None,
    ) -> int:
        """See `crawlq.frontier.base.Frontier.replay_dead`.

        Scans the dead letters in chunks; each chunk's chosen ones are requeued by one script
        (``revive.lua``), which re-checks that each is still dead.
        """
        k = self.keys
        revived = 0
        async for chunk in self._dead_chunks(where):
            hosts: dict[str, int] = {}
            body: list[Any] = []
            for fp, letter in chunk:
                if admit is None or admit(letter):
                    body += [fp, hosts.setdefault(letter.request.host, len(hosts) + 1)]
            if not body:
                continue
            keys = [
                k.dead, k.reqs, k.scores, k.attempts, k.stats, k.ready, k.inflight, k.next,
                k.policy, k.inbox, k.idle, k.strikes, k.dead_at, k.last_error,
                *(k.queue(h) for h in hosts),
            ]  # fmt: skip
            args = [self.politeness.default.concurrency, len(hosts), *hosts, *body]
            revived += int(await self._script("revive", keys, args))
        return revived

    # -- policy, job settings, stats ------------------------------------------------------

    async def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """See `crawlq.frontier.base.Frontier.set_host_policy`."""
        args = [host, round(policy.delay_s * 1000), policy.concurrency]
        await self._script("policy", [self.keys.policy], args)

    async def host_strike(self, host: str, strike: Strike, plan: StrikePlan) -> int:
        """See `crawlq.frontier.base.Frontier.host_strike`."""
        k = self.keys
        ddelay, dconc = self._policy_args()
        args: list[Any] = [self.clock.wall_ms(), host, str(strike), ddelay, dconc]
        args += [plan.probe_from, plan.down_from, *(round(s * 1000) for s in plan.pauses_s)]
        return int(await self._script("strike", [k.strikes, k.next, k.ready, k.policy], args))

    async def job_settings(self, proposed: dict[str, Any] | None) -> dict[str, Any] | None:
        """See `crawlq.frontier.base.Frontier.job_settings`."""
        k = self.keys
        if proposed is not None:
            text = json.dumps(proposed, sort_keys=True)
            stored = await self._script("job_settings", [], [text])
        else:
            stored = await self._call(lambda: self.client.hget(k.job_info, "settings"))
        if stored is None:
            return None
        try:  # shared state: whoever can write the key may have written anything
            value = json.loads(stored)
            if not isinstance(value, dict):
                raise ValueError(f"a JSON object is expected, not {type(value).__name__}")
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise ConfigError(
                "job",
                f"job {self.job!r}'s settings in Redis are unreadable ({exc}); seed the job "
                "again with its settings or use another --job",
            ) from None
        return dict(value)

    # -- robots.txt -----------------------------------------------------------------------

    async def robots_get(self, origin: str) -> RobotsRecord | None:
        """See `crawlq.frontier.base.Frontier.robots_get`.

        A value larger than `crawlq.robots_record.MAX_RECORD_BYTES` is not transferred.
        """
        got = await self._script("robots_get", [self.keys.robots], [origin, MAX_RECORD_BYTES])
        return self._robots_record(origin, got)

    def _robots_record(self, origin: str, got: Any) -> RobotsRecord | None:
        """Decode a stored record (None, bytes, or the length of one too large to send)."""
        if got is None:
            return None
        try:
            if isinstance(got, int):
                raise ValueError(f"{got} bytes, more than {MAX_RECORD_BYTES}")
            return RobotsRecord.from_bytes(got)
        except (ValueError, TypeError) as exc:
            if origin not in self._robots_warned:  # once per origin until it is replaced
                if len(self._robots_warned) < 10_000:
                    self._robots_warned.add(origin)
                logger.warning(
                    "unreadable robots.txt record of %s in job %r, refetching: %s",
                    origin,
                    self.job,
                    exc,
                )
            return None

    async def robots_claim(
        self, origin: str, holder: str, ttl_s: float, *, force: bool = False
    ) -> tuple[RobotsRecord | None, bool]:
        """See `crawlq.frontier.base.Frontier.robots_claim`.

        Freshness is judged in the script from the record's header (``expires_at_ms``); a
        record that looks fresh there but does not decode here is claimed again with
        ``force``, so a corrupt record cannot block its origin until its claimed expiry.
        """
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        keys = [self.keys.robots, self.keys.robots_claims]
        claim_ms = max(1, round(ttl_s * 1000))
        while True:
            args = [
                origin, holder, self.clock.wall_ms(), claim_ms, MAX_RECORD_BYTES, MAX_TTL_MS,
                "1" if force else "0",
            ]  # fmt: skip
            got, claimed = await self._script("robots_claim", keys, args)
            record = self._robots_record(origin, got)
            if claimed or force or got is None or record is not None:
                return record, bool(claimed)
            force = True  # "fresh" by its header, unreadable here: claim it to refetch

    async def robots_put(self, origin: str, record: RobotsRecord) -> None:
        """See `crawlq.frontier.base.Frontier.robots_put`."""
        keys = [self.keys.robots, self.keys.robots_claims]
        await self._script("robots_put", keys, [origin, record.to_bytes()])
        self._robots_warned.discard(origin)

    async def stats(self) -> FrontierStats:
        """See `crawlq.frontier.base.Frontier.stats`."""
        k = self.keys

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hgetall(k.stats)
                pipe.zrange(k.ready, 0, 199)
                pipe.hgetall(k.inflight)
                pipe.exists(k.job_info)
                pipe.hget(k.job_info, "id")
                return await pipe.execute()

        counters, ready, inflight, exists, job_id = await self._call(read)
        found = None if job_id is None else _text(job_id)
        if self.job_id is not None and found != self.job_id:
            raise JobGone(self.job, self.job_id, found)
        if not exists:
            raise FrontierError(
                f"job {self.job!r} does not exist on this Redis: never seeded, deleted, or lost "
                "in a restart of a Redis without persistence"
            )
        c = {key.decode(): int(value) for key, value in counters.items()}
        hosts = list(dict.fromkeys([h.decode() for h in ready] + [h.decode() for h in inflight]))

        async def lengths() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for host in hosts:
                    pipe.zcard(k.queue(host))
                    pipe.hget(k.next, host)
                return await pipe.execute()

        got = await self._call(lengths) if hosts else []
        per_host = [
            HostStats(
                host,
                int(got[2 * i]),
                int(inflight.get(host.encode(), 0)),
                int(got[2 * i + 1] or 0),
            )
            for i, host in enumerate(hosts)
        ]
        per_host.sort(key=lambda h: (-h.queued, -h.in_flight))
        backoff = await self.backoff_hosts()
        return FrontierStats(
            queued=c.get("queued", 0),
            in_flight=c.get("inflight", 0),
            delayed=c.get("delayed", 0),
            done=c.get("done", 0),
            dead=c.get("dead", 0),
            seen=c.get("seen", 0),
            over_budget=c.get("over_budget", 0),
            hosts=tuple(h for h in per_host[:20] if h.queued or h.in_flight),
            backoff=backoff,
        )

    async def job_engine(self) -> str:
        """The engine that runs the job: ``celery`` or ``native``.

        ``celery`` when a Celery engine marked it (the job hash's ``engine`` field, see
        `crawlq.celery.state`).
        """
        engine = await self._call(lambda: self.client.hget(self.keys.job_info, "engine"))
        return "celery" if engine == b"celery" else "native"

    async def backoff_hosts(self, limit: int = 20) -> tuple[HostBackoff, ...]:
        """Hosts in backoff (`FrontierStats.backoff`), also for a Celery-engine job."""
        k = self.keys
        strikes = await self._call(lambda: self.client.hgetall(k.strikes))
        counts: dict[str, list[int]] = {}
        for field_name, value in strikes.items():
            kind, _, host = _text(field_name).partition("\n")
            with contextlib.suppress(ValueError):
                pair = counts.setdefault(host, [0, 0])
                pair[0 if kind == "pushback" else 1] = int(value)
        hosts = [h for h, (p, f) in counts.items() if p > 0 or f > 0]
        if not hosts:
            return ()

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hmget(k.next, hosts)
                pipe.hmget(k.policy, hosts)
                return await pipe.execute()

        nexts, policies = await self._call(read)
        out = []
        for host, nxt, policy in zip(hosts, nexts, policies, strict=True):
            flags = _text(policy or b"").partition(" ")[2].partition(" ")[2]
            with contextlib.suppress(ValueError):
                pushbacks, failures = counts[host]
                out.append(
                    HostBackoff(host, pushbacks, failures, backoff_state(flags), int(nxt or 0))
                )
        out.sort(key=lambda b: -b.next_at_ms)
        return tuple(out[:limit])

    async def pages_per_s(self, window_s: int = 60) -> float:
        """Acks per second over the last ``window_s`` seconds (at most 119), all workers."""
        now_s = self.clock.wall_ms() // 1000
        slots = await self._call(lambda: self.client.hgetall(self.keys.rate))
        total = 0
        for value in slots.values():
            sec, count = (int(x) for x in value.split())
            if now_s - window_s < sec <= now_s:
                total += count
        return total / window_s

    async def retries_total(self) -> int:
        """Retries scheduled in the job so far, by every worker (both engines)."""
        value = await self._call(lambda: self.client.hget(self.keys.stats, "retries"))
        return int(value or 0)

    async def live_workers(self, within_s: float = 30.0) -> list[tuple[str, float]]:
        """Workers whose heartbeat is at most ``within_s`` old: (id, seconds since)."""
        now = self.clock.wall_ms()
        rows: list[Any] = await self._call(
            lambda: self.client.zrangebyscore(
                self.keys.workers, now - within_s * 1000, "+inf", withscores=True
            )
        )
        return [(bytes(w).decode(), (now - float(score)) / 1000) for w, score in rows]

    async def rejected(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest inbox entries that were not queued, with the reason (`_rejection`)."""
        rows = await self._call(lambda: self.client.lrange(self.keys.rejected, 0, limit - 1))
        return [dict(json.loads(r)) for r in rows]

    async def drop(self) -> int:
        """Delete every key of the job (the crawl's frontier, not its store). Returns keys."""

        async def drop_all() -> int:
            deleted = 0
            async for key in self.client.scan_iter(match=self.keys.pattern(), count=1000):
                deleted += int(await self.client.unlink(key))
            return deleted

        return await self._call(drop_all)

    async def close(self) -> None:
        """Close the connection pool; leases still held expire normally."""
        with contextlib.suppress(RedisError, OSError, asyncio.CancelledError):
            await self.client.aclose()


def _text(value: bytes | str) -> str:
    """A reply from a Redis of ``decode_responses=False`` as text (shared state: lenient)."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int | None:
    """A stored integer (or score), or None when missing or not a number (shared state)."""
    if value is None:
        return None
    try:
        return round(float(value))
    except (TypeError, ValueError, OverflowError):
        return None


def _request(value: bytes) -> CrawlRequest | None:
    """A stored request JSON, or None when it does not decode (shared state is untrusted)."""
    try:
        return CrawlRequest.from_json(value)
    except ValueError:
        return None
