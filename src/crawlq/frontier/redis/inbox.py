"""Taking requests in: the one push step (``push.lua``), and the producers' inbox.

`RedisInbox._push` is the atomic push of one chunk of at most `PUSH_CHUNK` requests (dedup,
queue bounds, page budget), for `crawlq.frontier.redis.queue.RedisWorkQueue.push` and
``offer`` and for the inbox drain. Scores are ``-priority * 2**33 + sequence`` (exact below
2**53), so priorities are clamped to ±(2**19 - 1).

The job's inbox holds producers' entries (plain URLs or JSON requests).

Producers ``LPUSH`` entries on the job's ``inbox`` list; a worker moves them to its own
``claim:{worker}`` list (``drain_inbox.lua``), parses them and pushes them (``push.lua``
deletes the claim), so nothing taken is lost if it dies in between: `RedisInbox._recover_claims`
gives dead workers' claims back (``recover_claims.lua``). An entry that is not a valid
request ends on the ``rejected`` list with the reason, as JSON (`RedisInbox._rejection`); one
larger than the job's ``inbox_max_entry_bytes`` is refused inside Redis, so only its size and
first bytes ever reach a worker.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Sequence
from typing import Any

from crawlq.errors import FrontierError
from crawlq.frontier.queue import Offer
from crawlq.frontier.redis.client import RedisClient
from crawlq.request import CrawlRequest
from crawlq.rules.scope import check_url_length
from crawlq.secrecy import loggable_entry

__all__ = ["PUSH_CHUNK", "RedisInbox"]


logger = logging.getLogger(__name__)

_PRIORITY_LIMIT = 2**19 - 1  # scores are -priority * 2**33 + sequence, exact below 2**53
PUSH_CHUNK = 500
"""Requests per ``push.lua`` call."""
_STALE_WORKER_MS = 60_000
_STALE_IDLE_MS = 60_000
_MAX_REASON_CHARS = 500
_REJECTED_SAMPLE_BYTES = 256
"""How many first bytes of an entry over `inbox_max_entry_bytes` its rejection keeps: all that
``drain_inbox.lua`` returns of it."""


class RedisInbox(RedisClient):
    """The push step, draining the inbox, rejected entries, and dead workers' claims."""

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
            body += [req.fingerprint, hidx, priority, req.to_json()]
            if self.bloom is not None:
                body += self.bloom.positions(req.fingerprint)
        b = self.bounds
        args = [
            self.clock.wall_ms(), self.politeness.default.concurrency, mode, nbits,
            "1" if claim_of else "0",
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
            *k.host_keys(), seen_key, k.reqs, k.stats, k.claim(claim_of or "-"),
            k.admitted, k.dead, k.dead_at, *(k.queue(h) for h in hosts),
        ]  # fmt: skip
        queued, refused, dropped = await self._script("push", keys, args)
        if dropped:
            logger.warning(
                "job %s: frontier full, %d request(s) dead-lettered as frontier_full",
                self.job,
                dropped,
            )
        return Offer(int(queued), int(refused), int(dropped))

    async def drain_inbox(self, worker_id: str, n: int = 1000) -> int:
        """Move up to ``n`` producer entries from the inbox into the frontier (with dedup).

        Entries are plain URLs or JSON requests (`CrawlRequest.to_json`); empty entries are
        wake-up tokens. Every other entry, whatever its bytes, ends as a queued request or
        as a record on the job's ``rejected`` list with the reason (see `_rejection`), and
        is logged: larger than `inbox_max_entry_bytes` (checked inside Redis by
        ``drain_inbox.lua``, which gives this process only the size and the first 256 bytes of
        such an entry, so a worker's memory never holds one), not UTF-8, not a valid request
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
        limit = self.inbox_max_entry_bytes
        entries = await self._script(
            "drain_inbox", [k.inbox, k.claim(worker_id)], [n, limit, _REJECTED_SAMPLE_BYTES]
        )
        self._claim_pending.discard(worker_id)
        if not entries:
            return 0
        requests: list[CrawlRequest] = []
        rejected: list[str] = []
        for entry in entries:
            if isinstance(entry, list):  # over the limit: its size and first bytes only
                rejected.append(self._oversized(int(entry[0]), bytes(entry[1])))
                continue
            raw = bytes(entry)
            if not raw.strip():
                continue
            try:
                requests.append(self._inbox_request(raw))
            except FrontierError:
                raise
            except Exception as exc:  # an entry is untrusted: whatever it raises rejects it
                reason = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
                rejected.append(self._reject(raw, reason[:_MAX_REASON_CHARS]))
        if rejected:
            await self._call(lambda: self.client.lpush(k.rejected, *rejected))
        added = 0
        for start in range(0, max(1, len(requests)), PUSH_CHUNK):
            chunk = requests[start : start + PUSH_CHUNK]
            last = start + PUSH_CHUNK >= len(requests)
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
        """The request an inbox entry (no larger than `inbox_max_entry_bytes`) asks for.

        Raises:
            ValueError: The entry is not UTF-8, not a valid request, or refused by
                `inbox_filter` (the message is the reason); anything else a malformed entry
                may raise while it is parsed.
        """
        text = raw.decode("utf-8").strip()  # UnicodeDecodeError is a ValueError
        request = CrawlRequest.from_json(text) if text.startswith("{") else CrawlRequest(text)
        check_url_length(request.url)
        if self.inbox_filter is not None:
            verdict = self.inbox_filter(request)
            if isinstance(verdict, str):
                raise ValueError(verdict)
            request = verdict
        return request

    def _reject(self, raw: bytes, reason: str) -> str:
        """Log a rejected entry and return its ``rejected`` record (`_rejection`)."""
        logger.warning(
            "rejected inbox entry %s of job %s: %s", loggable_entry(raw), self.job, reason
        )
        return self._rejection(raw, reason, len(raw))

    def _oversized(self, size: int, sample: bytes) -> str:
        """Log an entry of ``size`` bytes, over `inbox_max_entry_bytes`, and return its record.

        ``drain_inbox.lua`` checked its size inside Redis and gave only its first
        `_REJECTED_SAMPLE_BYTES` (``sample``): the entry itself never reaches this process.
        """
        limit = self.inbox_max_entry_bytes
        reason = f"entry_too_large: {size} bytes (the limit is {limit})"
        logger.warning(
            "rejected inbox entry of %d bytes of job %s, starting %s: %s",
            size,
            self.job,
            loggable_entry(sample),
            reason,
        )
        return self._rejection(sample, reason, size)

    @staticmethod
    def _rejection(kept: bytes, reason: str, size: int) -> str:
        """The ``rejected`` record of an entry: JSON with ``entry``, ``reason`` and ``size``.

        ``entry`` is ``kept`` as text when it is UTF-8, else its base64 with
        ``"encoding": "base64"`` (lossless either way). ``kept`` is the whole entry, or for
        an entry over `inbox_max_entry_bytes` its first `_REJECTED_SAMPLE_BYTES` (256), with
        ``"truncated": true`` (a sample cut inside a UTF-8 sequence is base64). ``size`` is
        always the whole entry's, in bytes.
        """
        record: dict[str, Any] = {"reason": reason, "size": size}
        if size > len(kept):
            record["truncated"] = True
        try:
            record["entry"] = kept.decode("utf-8")
        except UnicodeDecodeError:
            record["entry"] = base64.b64encode(kept).decode("ascii")
            record["encoding"] = "base64"
        return json.dumps(record)

    async def _recover_claims(self, now: int) -> None:
        """Give dead workers' inbox claims back to the inbox; forget stale idle entries.

        A worker is dead when its heartbeat is a minute old; an idle registration that old is
        a worker that died while it waited.
        """
        k = self.keys

        async def scan() -> list[str]:
            return [
                k.claim_worker(bytes(key))
                async for key in self.client.scan_iter(match=k.claims_pattern(), count=500)
            ]

        workers = await self._call(scan)
        if workers:
            keys = [k.workers, k.inbox, *(k.claim(w) for w in workers)]
            moved = await self._script("recover_claims", keys, [now, _STALE_WORKER_MS, *workers])
            if moved:
                logger.warning("returned %d inbox entries of dead workers to the inbox", moved)
        await self._call(lambda: self.client.zremrangebyscore(k.idle, "-inf", now - _STALE_IDLE_MS))

    async def rejected(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest inbox entries that were not queued, with the reason (`_rejection`)."""
        rows = await self._call(lambda: self.client.lrange(self.keys.rejected, 0, limit - 1))
        return [dict(json.loads(r)) for r in rows]
