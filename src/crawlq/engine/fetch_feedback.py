"""What a fetch tells every worker, about its host and about its proxy, and a failure's fate.

Both engines call these from `crawlq.engine.step.process`.

**Hosts.** A 429/503 or a connection failure is a strike against the host
(`crawlq.rules.politeness`): it pauses the host for every worker at once
(`Frontier.host_strike`) and, after enough in a row, dead-letters the URL (`failed_fetch`);
otherwise `crawlq.rules.retry.decide` says retry (with its backoff) or dead letter. A
robots.txt ``Crawl-delay`` raises the host's delay (`apply_crawl_delay`) and AutoThrottle moves
it with the latency (`throttle`), both through `Frontier.set_host_policy`.

**Proxies.** `crawlq.rules.proxies` says what a proxy's failure is. Here:

* Each worker reads the job's bench from the frontier (`Frontier.proxy_states`) at most every
  `REFRESH_S` seconds, before it chooses a proxy (`refresh_bench`), and writes what it learns
  at once: a failure (`Frontier.proxy_failure`, which benches the proxy after enough in a row)
  or a success after failures (`Frontier.proxy_ok`). So a proxy one worker benched is not
  tried by another (once its view is refreshed: within `REFRESH_S`).
* A request that failed because of its proxy is given back (a RELEASE: no attempt spent) and
  chosen anew, so it goes to another proxy once this one is benched (`proxy_failed`). A URL
  given back this way more than `MAX_PROXY_RELEASES` times in one process (every proxy fails
  it: the failure is likely the target's after all) is treated as an ordinary failure:
  retried with its backoff, then dead-lettered.
* With every proxy benched, nothing is sent: one WARNING line per bench episode says so and
  when the first proxy comes back, and each lease waits (at most `BENCH_WAIT_S` at a time)
  before it is given back (`proxies_benched`): the crawl waits, no URL is dead-lettered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

from crawlq.engine.deps import Deps
from crawlq.engine.outcome import Kind, Outcome, dead_outcome
from crawlq.errors import FetchError, ProxiesBenched, ProxyFailed, RetryableStatus
from crawlq.request import FetchResult, Lease
from crawlq.rules.politeness import AutoThrottle, strike_of
from crawlq.rules.proxies import BenchPlan, Proxy
from crawlq.rules.retry import decide

__all__ = [
    "BENCH_WAIT_S",
    "MAX_PROXY_RELEASES",
    "REFRESH_S",
    "apply_crawl_delay",
    "failed_fetch",
    "proxies_benched",
    "proxy_failed",
    "proxy_succeeded",
    "refresh_bench",
    "throttle",
]

logger = logging.getLogger(__name__)


async def failed_fetch(lease: Lease, exc: FetchError, deps: Deps) -> Outcome:
    """Retry or dead-letter a failed fetch; a pushback or connection failure pauses the host."""
    req = lease.request
    settings = deps.settings
    strike = strike_of(exc)
    if strike is not None:
        retry_after_s = exc.retry_after_s if isinstance(exc, RetryableStatus) else None
        plan = deps.politeness.plan(strike, retry_after_s)
        count = await deps.frontier.host_strike(req.host, strike, plan)
        pause_s = plan.pauses_s[min(count, len(plan.pauses_s)) - 1]
        logger.warning(
            "%s: %s %d in a row (%s); no request to it for %.1fs from any worker",
            req.host,
            strike,
            count,
            exc.reason,
            pause_s,
        )
        dead_reason = deps.politeness.dead_reason(strike, count, retry_after_s)
        if dead_reason is not None:
            logger.warning("dead %s: %s (%s)", req.url, dead_reason, exc)
            return dead_outcome(lease, dead_reason, str(exc))
    decision = decide(
        exc,
        lease.attempt,
        max_retries=settings.max_retries,
        base_s=settings.retry_delay_s,
        cap_s=settings.retry_max_delay_s,
    )
    if decision.retry:
        logger.info(
            "retry %s in %.2fs (attempt %d): %s",
            req.url,
            decision.delay_s,
            lease.attempt,
            decision.detail,
        )
        return Outcome(lease, Kind.RETRY, retry_delay_s=decision.delay_s, reason=decision.reason)
    logger.warning("dead %s after %d attempts: %s", req.url, lease.attempt, decision.detail)
    return dead_outcome(lease, decision.reason, decision.detail)


async def apply_crawl_delay(host: str, deps: Deps) -> None:
    """Raise the host's delay to its robots.txt Crawl-delay, for every worker (politeness)."""
    if deps.robots is None:
        return
    crawl_delay_s = deps.robots.crawl_delay_s(host)
    if crawl_delay_s is None:
        return
    policy = deps.politeness.policy_for(host, crawl_delay_s)
    if policy != (deps.politeness.configured(host) or deps.politeness.default):
        logger.info(
            "%s: robots.txt Crawl-delay %.2fs, delay now %.2fs",
            host,
            crawl_delay_s,
            policy.delay_s,
        )
        await deps.frontier.set_host_policy(host, policy)


async def throttle(host: str, result: FetchResult, throttle: AutoThrottle, deps: Deps) -> None:
    """Feed the response's latency to AutoThrottle; write the host's new delay if it moved."""
    crawl_delay_s = None if deps.robots is None else deps.robots.crawl_delay_s(host)
    floor = deps.politeness.policy_for(host, crawl_delay_s)
    ok = result.status < 400
    policy = throttle.observe(host, result.elapsed_s, ok=ok, floor=floor)
    if policy is not None:
        logger.debug("%s: autothrottle delay %.3fs", host, policy.delay_s)
        await deps.frontier.set_host_policy(host, policy)


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
    detail = f"proxy {shown} failed ({exc.reason})" + (f": {exc.detail}" if exc.detail else "")
    key = req.record_fingerprint
    count = _releases.pop(key, 0) + 1
    _releases[key] = count
    while len(_releases) > _RELEASES_REMEMBERED:
        _releases.popitem(last=False)
    if count > MAX_PROXY_RELEASES:
        _releases.pop(key, None)
        return await failed_fetch(lease, exc, deps)
    return Outcome(lease, Kind.RELEASE, reason="proxy_failed", detail=detail)


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
    detail = f"every proxy ({len(pool.all())}) is benched"
    return Outcome(lease, Kind.RELEASE, reason="proxies_benched", detail=detail)


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
