"""One URL's state in the Redis frontier, read in one atomic step (``inspect.lua``)."""

from __future__ import annotations

from crawlq.errors import JobGone
from crawlq.frontier.redis.core import RedisCore
from crawlq.frontier.redis.replies import reply_int, reply_request, reply_text
from crawlq.frontier.redis.scripts import SCRIPTS
from crawlq.frontier.values import UrlState

__all__ = ["UrlStateMixin"]


class UrlStateMixin(RedisCore):
    """`crawlq.frontier.base.Frontier.inspect` on Redis."""

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
