"""What a proxy's failure tells every worker, and the fate of the request it failed.

`crawlq.rules.proxies` says what a proxy's failure is. Here, in both engines (they share
`crawlq.engine.step.process`):

* Each worker reads the job's bench from the frontier (`Frontier.proxy_states`) at most every
  `REFRESH_S` seconds, before it chooses a proxy, and writes what it learns at once: a
  failure (`Frontier.proxy_failure`, which benches the proxy after enough in a row) or a
  success after failures (`Frontier.proxy_ok`). So a proxy one worker benched is not tried
  by another (once its view is refreshed: within `REFRESH_S`).
* A request that failed because of its proxy is given back (a RELEASE: no attempt spent) and
  chosen anew, so it goes to another proxy once this one is benched. A URL given back this
  way more than `MAX_PROXY_RELEASES` times in one process (every proxy fails it: the
  failure is likely the target's after all) is treated as an ordinary failure: retried with
  its backoff, then dead-lettered.
* With every proxy benched, nothing is sent: one WARNING line per bench episode says so and
  when the first proxy comes back, and each lease waits (at most `BENCH_WAIT_S` at a time)
  before it is given back: the crawl waits, no URL is dead-lettered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

from crawlq.engine.deps import Deps
from crawlq.engine.host_feedback import failed_fetch
from crawlq.engine.outcome import Kind, Outcome
from crawlq.errors import ProxiesBenched, ProxyFailed
from crawlq.request import Lease
from crawlq.rules.proxies import BenchPlan, Proxy

__all__ = [
    "BENCH_WAIT_S",
    "MAX_PROXY_RELEASES",
    "REFRESH_S",
    "proxies_benched",
    "proxy_failed",
    "proxy_succeeded",
    "refresh_bench",
]

logger = logging.getLogger(__name__)

REFRESH_S = 1.0
"""Seconds a worker's view of the shared bench is used before it is read again."""

BENCH_WAIT_S = 5.0
"""Longest a lease waits for a benched proxy before it is given back (and leased again)."""

MAX_PROXY_RELEASES = 8
"""Proxy failures of one URL, in one process, given back without spending an attempt."""

_RELEASES_REMEMBERED = 4096
"""Most URLs whose proxy releases a process counts (the oldest are forgotten)."""

_read_at: dict[int, float] = {}  # id(pool) -> time.monotonic() of its last read
_releases: OrderedDict[bytes, int] = OrderedDict()
_warned_until: dict[int, int] = {}  # id(pool) -> the bench end last announced


async def refresh_bench(deps: Deps, *, force: bool = False) -> None:
    """Read the job's proxy bench into the fetcher's pool when its view is older than 1 s."""
    pool = deps.fetcher.proxies
    if not pool.active:
        return
    now = time.monotonic()
    if not force and now - _read_at.get(id(pool), -REFRESH_S) < REFRESH_S:
        return
    pool.states = await deps.frontier.proxy_states()
    _read_at[id(pool)] = now


async def proxy_failed(lease: Lease, exc: ProxyFailed, deps: Deps) -> Outcome:
    """Count the failure against the proxy (for every worker) and give the lease back."""
    req = lease.request
    pool = deps.fetcher.proxies
    state = await deps.frontier.proxy_failure(
        exc.proxy_id, BenchPlan.of(deps.settings.proxy_bench_s)
    )
    pool.states[exc.proxy_id] = state
    shown = _shown(pool.all(), exc.proxy_id)
    if state.failures == 0 and state.until_ms > 0:
        logger.warning(
            "proxy %s benched for %.0fs (bench %d in a row), for every worker: %s",
            shown,
            max(0.0, state.until_ms / 1000 - time.time()),
            state.benches,
            exc.detail or exc.reason,
        )
    else:
        logger.warning("proxy %s failed (%s): %s", shown, exc.reason, exc.detail)
    key = req.record_fingerprint
    count = _releases.pop(key, 0) + 1
    _releases[key] = count
    while len(_releases) > _RELEASES_REMEMBERED:
        _releases.popitem(last=False)
    if count > MAX_PROXY_RELEASES:
        _releases.pop(key, None)
        return await failed_fetch(lease, exc, deps)
    return Outcome(lease, Kind.RELEASE, reason="proxy_failed")


async def proxies_benched(lease: Lease, exc: ProxiesBenched, deps: Deps) -> Outcome:
    """Every proxy is benched: say so once, wait a little, give the lease back."""
    pool = deps.fetcher.proxies
    wait_s = max(0.0, exc.until_ms / 1000 - time.time())
    if _warned_until.get(id(pool)) != exc.until_ms:
        _warned_until[id(pool)] = exc.until_ms
        logger.warning(
            "every proxy (%d) is benched; the crawl waits %.0fs for the first to come back",
            len(pool.all()),
            wait_s,
        )
    await asyncio.sleep(min(wait_s, BENCH_WAIT_S))
    await refresh_bench(deps, force=True)
    return Outcome(lease, Kind.RELEASE, reason="proxies_benched")


async def proxy_succeeded(proxy: Proxy | None, deps: Deps) -> None:
    """A response came through ``proxy``: forget its failures in a row, for every worker."""
    if proxy is None:
        return
    pool = deps.fetcher.proxies
    if pool.states.pop(proxy.id, None) is not None:
        await deps.frontier.proxy_ok(proxy.id)


def _shown(proxies: tuple[Proxy, ...], proxy_id: str) -> str:
    """``scheme://host:port`` of the proxy with ``proxy_id`` (never its credentials)."""
    return next((str(p) for p in proxies if p.id == proxy_id), proxy_id)
