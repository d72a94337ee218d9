"""What a response or a failure tells every worker about its host, and a failed fetch's fate.

A 429/503 or a connection failure is a strike against the host (`crawlq.rules.politeness`): it
pauses the host for every worker at once (`Frontier.host_strike`) and, after enough in a
row, dead-letters the URL (`failed_fetch`); otherwise `crawlq.rules.retry.decide` says retry (with
its backoff) or dead letter. A robots.txt ``Crawl-delay`` raises the host's delay
(`apply_crawl_delay`) and AutoThrottle moves it with the latency (`throttle`), both through
`Frontier.set_host_policy`.
"""

from __future__ import annotations

import logging

from crawlq.engine.deps import Deps
from crawlq.engine.outcome import Kind, Outcome, dead_outcome
from crawlq.errors import FetchError, RetryableStatus
from crawlq.request import FetchResult, Lease
from crawlq.rules.politeness import AutoThrottle, strike_of
from crawlq.rules.retry import decide

__all__ = ["apply_crawl_delay", "failed_fetch", "throttle"]

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
