r"""Inspection on Redis (`crawlq.frontier.inspection.Inspection`): one URL, the dead letters.

`RedisInspection.inspect` reads one URL's state in one atomic, read-only step
(``inspect.lua``). Dead letters are streamed with ``HSCAN`` and replayed with ``revive.lua``:
a ``dead`` hash value is ``reason "\n" score "\n" request JSON`` (the reason, then the request's
record as it was queued); its attempts and the time it
was dead-lettered are in the ``attempts`` and ``dead_at`` hashes. A value that does not decode
(shared state) is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from crawlq.errors import JobGone
from crawlq.frontier.inspection import EVERY_DEAD, DeadFilter, DeadLetter, Replay, UrlState
from crawlq.frontier.queue import QueueBounds
from crawlq.frontier.redis.client import RedisClient
from crawlq.frontier.redis.replies import reply_int, reply_request, reply_text
from crawlq.frontier.redis.scripts import SCRIPTS
from crawlq.request import CrawlRequest

__all__ = ["RedisInspection"]


logger = logging.getLogger(__name__)


class RedisInspection(RedisClient):
    """One URL's state, and listing and replaying dead letters."""

    async def inspect(self, fingerprint: bytes) -> UrlState:
        """See `crawlq.frontier.inspection.Inspection.inspect`: one read-only script.

        The script is ``inspect.lua``.

        With Bloom-filter dedup, ``done`` is what the filter says (`UrlState.exact` False).
        A record does not name its host (the lease and retry entries and the next-allowed
        time are the host's), so a queued URL's state is read twice: once to find its request,
        and again with that request's host, until both reads agree (at most three reads).

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
        got = await self._inspect_read(keys, [fp, mode], bits)
        job_id, seen, value, dead, attempts, owner, deadline, retry_due_ms = got[:8]
        next_at, error, dead_at = got[8:]
        found = None if job_id is None else reply_text(job_id)
        if self.job_id is not None and found != self.job_id:
            raise JobGone(self.job, self.job_id, found)
        tries = reply_int(attempts)
        if dead is not None:
            reason, _, rest = bytes(dead).partition(b"\n")
            return UrlState(
                fp,
                "dead",
                request=reply_request(rest.partition(b"\n")[2]),
                attempts=tries,
                reason=reply_text(reason),
                dead_at_ms=reply_int(dead_at),
            )
        if value is not None:
            request = reply_request(bytes(value).partition(b"\n")[2])
            last = None if error is None else reply_text(error)
            if owner is not None:
                worker = reply_text(owner).rstrip("\n").partition(" ")[2]
                return UrlState(
                    fp,
                    "in_flight",
                    request=request,
                    attempts=tries,
                    worker_id=worker or None,
                    deadline_ms=reply_int(deadline),
                    reason=last,
                )
            if retry_due_ms is not None:
                return UrlState(
                    fp, "delayed", request=request, attempts=tries,
                    ready_at_ms=reply_int(retry_due_ms), reason=last,
                )  # fmt: skip
            return UrlState(
                fp, "queued", request=request, attempts=tries or 0,
                ready_at_ms=reply_int(next_at) or 0, reason=last,
            )  # fmt: skip
        if int(seen):
            return UrlState(fp, "done", exact=self.bloom is None)
        return UrlState(fp, "unseen")

    async def _inspect_read(self, keys: list[str], args: list[Any], bits: list[int]) -> Any:
        """``inspect.lua``'s reply, read again with the queued request's host until they agree."""
        host = ""
        for _ in range(3):

            async def read(host: str = host) -> Any:
                return await SCRIPTS["inspect"].run(self.client, keys, [*args, host, *bits])

            got = await self._call(read)
            queued = None if got[2] is None or got[3] is not None else bytes(got[2])
            request = None if queued is None else reply_request(queued.partition(b"\n")[2])
            found = "" if request is None else request.host
            if found == host:
                break
            host = found
        return got

    async def dead_letters(self, where: DeadFilter = EVERY_DEAD) -> AsyncIterator[DeadLetter]:
        """See `crawlq.frontier.inspection.Inspection.dead_letters`: ``HSCAN`` of them."""
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
        r"""A ``dead`` hash value (``reason "\n" score "\n" request JSON``), or None if garbled."""
        reason, _, rest = value.partition(b"\n")
        try:
            request = CrawlRequest.from_json(rest.partition(b"\n")[2])
        except ValueError as exc:  # shared state: whoever can write the key may write anything
            logger.warning(
                "skipping unreadable dead letter %s of job %s: %s", fp.hex(), self.job, exc
            )
            return None
        return DeadLetter(request, reply_text(reason), reply_int(attempts), reply_int(dead_at))

    async def replay_dead(
        self,
        where: DeadFilter = EVERY_DEAD,
        admit: Callable[[DeadLetter], bool] | None = None,
        bounds: QueueBounds | None = None,
    ) -> Replay:
        """See `crawlq.frontier.inspection.Inspection.replay_dead`.

        Scans the dead letters in chunks; each chunk's chosen ones are requeued by one script
        (``revive.lua``), which re-checks that each is still dead and applies `bounds`.
        """
        k = self.keys
        b = bounds or self.bounds
        total = Replay()
        async for chunk in self._dead_chunks(where):
            hosts: dict[str, int] = {}
            body: list[Any] = []
            chosen: list[DeadLetter] = []
            for fp, letter in chunk:
                if admit is None or admit(letter):
                    body += [fp, hosts.setdefault(letter.request.host, len(hosts) + 1)]
                    chosen.append(letter)
            if not body:
                continue
            keys = [
                *k.host_keys(), k.dead, k.reqs, k.attempts, k.stats, k.strikes,
                k.dead_at, k.last_error, *(k.queue(h) for h in hosts),
            ]  # fmt: skip
            args = [
                self.politeness.default.concurrency, self.clock.wall_ms(),
                b.max_queued or 0, b.max_queued_per_host or 0,
                "drop" if b.when_full == "drop-lowest" else "block", len(hosts), *hosts, *body,
            ]  # fmt: skip
            revived, refused, dropped, *which = await self._script("revive", keys, args)
            done = Replay(int(revived), refused=int(refused), dropped=int(dropped))
            done.by_reason.update(chosen[int(n) - 1].reason for n in which)
            if done.dropped:
                logger.warning(
                    "job %s: frontier full, %d request(s) dead-lettered as frontier_full",
                    self.job,
                    done.dropped,
                )
            total.add(done)
        return total
