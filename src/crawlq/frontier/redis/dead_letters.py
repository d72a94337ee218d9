r"""Dead letters in the Redis frontier: streamed with ``HSCAN``, replayed with ``revive.lua``.

A ``dead`` hash value is ``reason "\n" host "\n" request JSON``; its attempts and the time it
was dead-lettered are in the ``attempts`` and ``dead_at`` hashes. A value that does not decode
(shared state) is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from crawlq.frontier.redis.core import RedisCore
from crawlq.frontier.redis.replies import reply_int, reply_text
from crawlq.frontier.values import EVERY_DEAD, DeadFilter, DeadLetter, Replay
from crawlq.request import CrawlRequest

__all__ = ["DeadLettersMixin"]


logger = logging.getLogger(__name__)


class DeadLettersMixin(RedisCore):
    """Listing and replaying dead letters (`crawlq.frontier.base.Frontier`)."""

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
        return DeadLetter(request, reply_text(reason), reply_int(attempts), reply_int(dead_at))

    async def replay_dead(
        self,
        where: DeadFilter = EVERY_DEAD,
        admit: Callable[[DeadLetter], bool] | None = None,
    ) -> Replay:
        """See `crawlq.frontier.base.Frontier.replay_dead`.

        Scans the dead letters in chunks; each chunk's chosen ones are requeued by one script
        (``revive.lua``), which re-checks that each is still dead and applies `bounds`.
        """
        k = self.keys
        b = self.bounds
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
                *k.host_keys(), k.dead, k.reqs, k.scores, k.attempts, k.stats, k.strikes,
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
