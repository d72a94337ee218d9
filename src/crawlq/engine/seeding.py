"""``crawlq seed``: push seed requests into a job's frontier, deduplicated, in chunks.

The seeds are read twice, so that their number does not matter (``crawlq seed -`` of
millions of lines keeps its memory flat): first into a `SeedSpool`, which checks each one and
keeps its JSON line in an unnamed temporary file, its host and the count; then back from
that file, `SEED_CHUNK` at a time, into the frontier. The job's settings are planned from the
seeds' hosts (`crawlq.engine.plan.plan_seed`) and stored by the first producer; a bad seed
stops the producer before anything is opened. The requests go in chunks of `SEED_CHUNK`;
while the frontier is full
(``max_queued``, ``when_full = "block"``) the producer offers them again every
`PUSH_RETRY_S` seconds, for at most ``max_push_wait_s``. A replay of dead letters is a
producer too (`replay_into_room`: ``seed --retry-dead``, ``crawlq dead replay``): it waits
for room the same way.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Self

from crawlq.engine.backends import open_backends
from crawlq.engine.plan import new_private_seed_hosts, plan_seed, warn_private_seed_hosts
from crawlq.errors import (
    FrontierError,
    InvalidURL,
    NothingToSeed,
    QueueFullTimeout,
    SeedInterrupted,
)
from crawlq.frontier import Frontier
from crawlq.frontier.inspection import EVERY_DEAD, DeadFilter, DeadLetter, Replay
from crawlq.frontier.queue import QueueBounds
from crawlq.request import CrawlRequest
from crawlq.rules.scope import check_url_length
from crawlq.settings import Settings
from crawlq.urls import UrlRules

__all__ = [
    "BAD_SHOWN",
    "PUSH_RETRY_S",
    "SEED_CHUNK",
    "SeedResult",
    "SeedSpool",
    "replay_into_room",
    "seed",
]

logger = logging.getLogger(__name__)

SEED_CHUNK = 500
"""Seed requests pushed per call: what `seed` can count as queued when the frontier fails
part way (the Redis frontier pushes at most this many in one script)."""

PUSH_RETRY_S = 0.5
"""How often a producer offers its waiting requests again while the frontier is full."""

BAD_SHOWN = 10
"""Bad seed lines a `SeedSpool` keeps the message of (the others are only counted)."""


_JSON_LINE = b"J"
"""A spool line holding a request's JSON (`CrawlRequest.to_json` or a producer's own)."""
_URL_LINE = b"U"
"""A spool line holding a URL line: ``U<priority> <url>``."""


def _parse_kept(line: bytes) -> CrawlRequest:
    """The request of one line that `SeedSpool` wrote (already parsed once, so it parses)."""
    text = line[1:].rstrip(b"\n").decode(errors="surrogatepass")
    if line[:1] == _URL_LINE:
        priority, url = text.split(" ", 1)
        return CrawlRequest(url, priority=int(priority))
    return CrawlRequest.from_json(text)


class SeedSpool:
    """Checked seed requests in an unnamed temporary file: their count, their hosts, batches.

    A producer may be given any number of seeds (``crawlq seed -`` reads stdin to its end).
    The job's settings need every seed's host before the first push (`plan_seed`), and a bad
    seed stops the producer before anything is queued, so the seeds are read twice: `add`
    writes a request's JSON line (`CrawlRequest.to_json`, the SQLite frontier's own form)
    to the file and `read_lines` each input line it checked, as given; `batches` reads them
    back, parsed again, a batch at a time. Memory grows with the number of distinct hosts,
    never with the number of seeds.

    The file comes from `tempfile.TemporaryFile` (``TMPDIR``): mode 0600 and unlinked as it
    is created, so it is gone when the spool is closed or the process dies. It holds what the
    requests hold, cookie values included, as the frontier will.

    Attributes:
        given: Requests added.
        hosts: Their distinct hosts (`CrawlRequest.host`), in order of first appearance.
        bad: Of the lines `read_lines` refused, the first `BAD_SHOWN` as ``"WHERE: why"``.
        bad_count: How many lines `read_lines` refused in all.
    """

    def __init__(self) -> None:
        self.given = 0
        self.bad: list[str] = []
        self.bad_count = 0
        self._hosts: dict[str, None] = {}
        self._file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())

    @property
    def hosts(self) -> tuple[str, ...]:
        """The distinct hosts of the requests added, in order of first appearance."""
        return tuple(self._hosts)

    @classmethod
    def of(cls, requests: Iterable[CrawlRequest]) -> SeedSpool:
        """A spool holding ``requests`` (a caller's list, or any iterable read once)."""
        spool = cls()
        for request in requests:
            spool.add(request)
        return spool

    def add(self, request: CrawlRequest) -> None:
        """Keep ``request`` (its JSON line) for `batches`."""
        self._keep(_JSON_LINE, request.to_json(), request.host)

    def read_lines(self, numbered: Iterable[tuple[str, str]], *, priority: int = 0) -> None:
        """Check and keep the seed lines of a producer's input, read once, line by line.

        A line is an absolute http(s) URL (queued with ``priority``; at most
        `crawlq.request.MAX_URL_LENGTH` characters) or, when it starts with ``{``, a JSON
        request (`CrawlRequest.from_json`, its own priority). A line that is neither is
        counted in ``bad_count`` (and named in ``bad``) instead. A line is kept as it was
        given, and `batches` parses it again the same way.

        Args:
            numbered: ``(where, line)`` pairs, ``where`` naming the line for a message
                (``"line 7"``), ``line`` as it is to be read (stripped by the caller).
            priority: The priority of URL lines.
        """
        for where, line in numbered:
            try:
                if line.startswith("{"):
                    kind, request = _JSON_LINE, CrawlRequest.from_json(line)
                else:
                    check_url_length(line)
                    kind, request = _URL_LINE, CrawlRequest(line, priority=priority)
            except (InvalidURL, ValueError) as exc:
                self.bad_count += 1
                if len(self.bad) < BAD_SHOWN:
                    self.bad.append(f"{where}: {exc}")
                continue
            if "\n" in line:  # an argument may hold one: keep the request's own JSON
                self.add(request)
            elif kind == _URL_LINE:
                self._keep(kind + str(priority).encode() + b" ", line, request.host)
            else:
                self._keep(kind, line, request.host)

    def _keep(self, kind: bytes, text: str, host: str) -> None:
        """Write one line of the spool: ``kind`` and ``text`` (which holds no line break).

        Surrogates (an argument's undecodable bytes) pass through, so the text reads back
        as it was given.
        """
        self._file.write(kind + text.encode(errors="surrogatepass") + b"\n")
        self._hosts[host] = None
        self.given += 1

    def batches(self, size: int = SEED_CHUNK) -> Iterator[list[CrawlRequest]]:
        """The requests added, in order, ``size`` at a time (from the start on every call)."""
        self._file.flush()
        self._file.seek(0)
        batch: list[CrawlRequest] = []
        for line in self._file:
            batch.append(_parse_kept(line))
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch

    def close(self) -> None:
        """Remove the file (already unlinked: its space is freed)."""
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class SeedResult:
    """What `seed` did.

    Attributes:
        given: Requests given.
        queued: Requests that were new to the job and are now queued.
        settings: The job's settings in force.
        private_hosts: Hosts of these seeds that the job's private-address guard will refuse
            (the job existed with other seed hosts and without ``allow_private``).
        replayed: Dead letters put back in the queue first (``retry_dead``).
    """

    given: int
    queued: int
    settings: Settings
    private_hosts: tuple[str, ...] = ()
    replayed: int = 0


async def seed(
    settings: Settings,
    requests: Iterable[CrawlRequest] | SeedSpool,
    *,
    retry_dead: bool = False,
    spider_domains: Sequence[str] = (),
) -> SeedResult:
    """Push seed requests into the job's frontier (deduplicated), storing the job's settings.

    The job's settings are planned by `crawlq.engine.plan.plan_seed` (allowed domains: the
    settings', else the seeds' hosts). The seeds' hosts become the job's seed hosts
    (exempt from the private-address guard) when this call creates the job; on an existing
    job, seeds on other hosts that resolve to private addresses are logged as a warning and
    returned in `SeedResult.private_hosts`. With ``retry_dead`` the job's dead letters are
    requeued first.

    No seeds at all is fine for a job that exists (a producer's empty batch: its scope is
    set), and creates a job whose scope is given (``allowed_domains``, or ``spider_domains``)
    for producers that feed its inbox; with neither it is `NothingToSeed`, and no job is
    created, since no worker could crawl it and its settings are fixed once stored.

    Args:
        settings: The producer's settings.
        requests: The seeds: a `SeedSpool` (kept open; the caller closes it), or any
            iterable, read once into a spool of this call's own. Either way they are pushed
            `SEED_CHUNK` at a time and memory does not grow with their number.
        retry_dead: Requeue the job's dead letters first.
        spider_domains: The ``allowed_domains`` of the job's spider, when the caller loaded
            it (``crawlq seed --spider``): a job they scope needs no seeds to be created.

    Raises:
        NothingToSeed: No seeds, no domains, and the job does not exist (nothing written).
        ConfigError: Settings conflict with the job's, or no job name on a shared frontier.
        FrontierUnavailable: The frontier cannot be reached.
        SeedInterrupted: The frontier failed (Redis at its maxmemory: `FrontierFull`, or an
            outage) after the job was opened; it says how many requests were queued before
            (``queued``). Re-running the same seed resumes: queued ones are skipped.
    """
    if isinstance(requests, SeedSpool):
        return await _seed_spool(settings, requests, retry_dead, spider_domains)
    with SeedSpool.of(requests) as spool:
        return await _seed_spool(settings, spool, retry_dead, spider_domains)


async def _seed_spool(
    settings: Settings, spool: SeedSpool, retry_dead: bool, spider_domains: Sequence[str]
) -> SeedResult:
    """`seed` of the requests of ``spool``."""
    settings = plan_seed(settings, spool.hosts)
    unscoped = not settings.allowed_domains and not spider_domains  # no seeds, no domains
    refuse = NothingToSeed(settings.job or "") if unscoped else None
    async with open_backends(
        settings, create=True, runs_spider=False, refuse_new=refuse
    ) as backends:
        private = await new_private_seed_hosts(settings, backends.settings)
        warn_private_seed_hosts(backends.settings, private)
        replayed = 0
        if retry_dead:
            replay, _, timeout = await replay_into_room(
                backends.frontier, max_wait_s=backends.settings.max_push_wait_s
            )
            if timeout is not None:
                raise SeedInterrupted(0, spool.given, timeout)
            replayed = replay.queued
        rules = UrlRules(backends.settings.strip_url_params)  # the job's, as for its links
        queued = 0
        s = backends.settings
        try:
            for batch in spool.batches(SEED_CHUNK):
                chunk = [r.rewritten(rules) for r in batch]
                waited_since: float | None = None
                while True:
                    offer = await backends.frontier.offer(chunk)
                    queued += offer.queued
                    if not offer.refused:
                        break
                    waited_since = _room_wait(
                        waited_since, backends.frontier.bounds, s.max_push_wait_s, queued
                    )
                    await asyncio.sleep(PUSH_RETRY_S)
                if waited_since is not None:
                    logger.warning("frontier has room again: seeding goes on")
        except FrontierError as exc:
            raise SeedInterrupted(queued, spool.given, exc) from exc
        return SeedResult(spool.given, queued, backends.settings, tuple(private), replayed)


async def replay_into_room(
    frontier: Frontier,
    where: DeadFilter = EVERY_DEAD,
    admit: Callable[[DeadLetter], bool] | None = None,
    *,
    bounds: QueueBounds | None = None,
    max_wait_s: float | None = None,
) -> tuple[Replay, bool, QueueFullTimeout | None]:
    """Replay dead letters as a producer pushes: under the frontier's bounds, waiting for room.

    `Frontier.replay_dead` requeues what fits; at a ``block`` bound the dead letters left
    (refused) are replayed again every `PUSH_RETRY_S` seconds while the workers make room,
    for at most ``max_wait_s`` seconds of waiting (None: no limit), as `seed` offers its
    requests again. At ``drop-lowest`` nothing waits: the frontier dead-letters the lowest
    priorities as ``frontier_full`` (counted in `Replay.dropped`).

    Returns:
        What was replayed in all (``refused``: those still dead when the wait ran out),
        whether it waited for room, and the `QueueFullTimeout` when the wait ran out.
    """
    bounds = bounds or frontier.bounds
    total = Replay()
    waited_since: float | None = None
    while True:
        done = await frontier.replay_dead(where, admit, bounds)
        total.add(done)
        total.refused = done.refused
        if not done.refused:
            break
        try:
            waited_since = _room_wait(waited_since, bounds, max_wait_s, total.queued)
        except QueueFullTimeout as exc:
            return total, True, exc
        await asyncio.sleep(PUSH_RETRY_S)
    if waited_since is not None:
        logger.warning("frontier has room again: the replay goes on")
    return total, waited_since is not None, None


def _room_wait(
    waited_since: float | None, bounds: QueueBounds, limit: float | None, queued: int
) -> float:
    """Note a wait for room in a full frontier (`QueueBounds` ``block``); say so once.

    Returns when the wait began (monotonic seconds).

    Raises:
        QueueFullTimeout: The frontier has stayed full for ``limit`` seconds (None: never).
    """
    now = time.monotonic()
    if waited_since is None:
        logger.warning(
            "frontier full (max_queued %s, per host %s): waiting for workers to make room;"
            " %d queued so far",
            bounds.max_queued,
            bounds.max_queued_per_host,
            queued,
        )
        waited_since = now
    if limit is not None and now - waited_since >= limit:
        raise QueueFullTimeout(limit, bounds.max_queued)
    return waited_since
