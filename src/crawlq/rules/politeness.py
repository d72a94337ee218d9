"""Host politeness: every rule that decides how hard crawlq may press one host.

Both engines ask this module; the frontier backends only store the numbers it gives and
enforce them atomically for every worker at once (docs/architecture.md invariants 3 and 6). It is
pure (no I/O) and imports only plain types, so the backends may use its value types.

The rules, for one host (``host`` or ``host:port``, see `crawlq.urls.host_key`):

* **Configured politeness**: ``delay_s`` between the starts of two requests and
  ``host_concurrency`` requests at once, from the settings; a per-host override
  (``[hosts."example.com"]`` in ``--config``) replaces them for that host and its subdomains.
* **Crawl-delay** (robots.txt): not part of RFC 9309; one of the "other records" its §2.2.4
  lets a crawler interpret. crawlq reads it as the seconds between two requests and *raises*
  the host's delay to it (never lowers it), capped at ``max_crawl_delay_s``.
* **Pushback**: a 429 or 503 response moves the host's next-allowed time for every worker:
  to now + ``Retry-After`` (RFC 9110 §10.2.3) when the server sent one, capped at
  ``max_retry_after_s`` (a longer one dead-letters that URL as ``retry_after_too_long`` and
  pauses the host for the cap); without it, by an exponential backoff on the host's
  consecutive pushbacks (``host_backoff_s``, doubling up to ``host_backoff_max_s``). Any
  other response with a ``Retry-After`` (a 500 that sends one) pauses the host the same way.
* **Connection failures** (timeouts, refused connections, DNS failures, resets) back the host
  off the same way, counted separately. After ``breaker_failures`` in a row the host's
  circuit breaker opens: the host is *parked* for ``breaker_cooldown_s`` and then *probed*
  with one request at a time; each failed probe parks it again. After ``breaker_parks`` parks
  the host is declared unreachable: its queued and delayed URLs are dead-lettered as
  ``host_unreachable``. Any response from the host (a success or an HTTP error) resets both
  counts and closes the breaker.

* **AutoThrottle** (``--autothrottle``, off by default), as Scrapy's: after each response a
  worker moves the host's delay halfway towards ``latency / autothrottle_target_concurrency``
  (an error response never lowers it), within [the host's configured delay raised by its
  Crawl-delay, ``max_delay_s``], and writes it to the frontier, where every worker's leases
  obey it (`AutoThrottle`).

Counts are consecutive events of one job on one host, kept by the frontier; the URL that
failed still goes through its own retry policy (`crawlq.rules.retry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from crawlq.errors import FetchError, RetryableStatus, RobotsUnreachable
from crawlq.urls.canonical import host_name

if TYPE_CHECKING:
    from crawlq.settings import Settings

__all__ = [
    "HOST_UNREACHABLE",
    "RETRY_AFTER_TOO_LONG",
    "AutoThrottle",
    "HostPolicy",
    "Politeness",
    "Strike",
    "StrikePlan",
    "rules_with_default",
    "strike_of",
]

HOST_UNREACHABLE = "host_unreachable"
"""Dead-letter reason of the URLs of a host whose circuit breaker gave up."""
RETRY_AFTER_TOO_LONG = "retry_after_too_long"
"""Dead-letter reason of a URL whose server asked for a wait over ``max_retry_after_s``."""

_PUSHBACK_STATUSES = frozenset({429, 503})
_CONNECTION_REASONS = frozenset(
    {"timeout", "connect_error", "dns_error", "connection_reset", "robots_unreachable"}
)  # robots_unreachable: only when this caller requested robots.txt (RobotsUnreachable)
_SCHEDULE_CAP = 32  # entries of a backoff schedule handed to the frontier


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Politeness for one host.

    Attributes:
        delay_s: Seconds between the starts of two requests to the host (>= 0).
        concurrency: Requests to the host at once, across all workers (>= 1).
    """

    delay_s: float = 1.0
    concurrency: int = 1

    def __post_init__(self) -> None:
        if self.delay_s < 0:
            raise ValueError(f"delay_s must not be negative, got {self.delay_s}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")


class Strike(StrEnum):
    """What a host did that backs it off (the frontier counts each kind in a row)."""

    PUSHBACK = "pushback"
    """HTTP 429 or 503, or any retryable status with ``Retry-After``."""
    FAILURE = "failure"
    """No HTTP answer: timeout, refused connection, DNS failure, reset."""


def strike_of(error: FetchError) -> Strike | None:
    """Which strike a failed fetch counts against its host, or None (the URL's own problem).

    A robots.txt failure remembered from an earlier request (`RobotsUnreachable` with
    ``requested`` False) counts none: no request was sent for it.

    Args:
        error: The classified failure from `crawlq.fetch.Fetcher.fetch` or
            `crawlq.robots.RobotsCache`.
    """
    if isinstance(error, RobotsUnreachable) and not error.requested:
        return None
    if isinstance(error, RetryableStatus):
        if error.status in _PUSHBACK_STATUSES or error.retry_after_s is not None:
            return Strike.PUSHBACK
        return None
    if error.transient and error.reason in _CONNECTION_REASONS:
        return Strike.FAILURE
    return None


@dataclass(frozen=True, slots=True)
class StrikePlan:
    """How the frontier pauses a host for a strike (`crawlq.frontier.hosts.HostRules.host_strike`).

    Attributes:
        pauses_s: After the host's ``k``-th strike of this kind in a row it gets no new
            request for ``pauses_s[k-1]`` seconds (the last entry repeats).
        probe_from: From this count on, one request at a time until the host answers (its
            circuit breaker is open: parked, then probed); 0: never.
        down_from: From this count on, the host is down: its queued URLs are handed out to be
            dead-lettered as ``host_unreachable`` without a request; 0: never.
    """

    pauses_s: tuple[float, ...]
    probe_from: int = 0
    down_from: int = 0

    def __post_init__(self) -> None:
        if not self.pauses_s or min(self.pauses_s) < 0:
            raise ValueError(f"pauses_s must be non-empty and >= 0, got {self.pauses_s}")


@dataclass(frozen=True, slots=True)
class Politeness:
    """A job's politeness rules (module docstring). Build with `from_settings`.

    Attributes:
        default: Politeness of hosts without an override.
        overrides: Per-host politeness by bare host name (`crawlq.urls.host_name`: lower
            case, an IP literal in one written form; applies to subdomains).
        max_crawl_delay_s: Largest robots.txt Crawl-delay honoured, in seconds.
        max_retry_after_s: Largest Retry-After honoured, in seconds.
        host_backoff_s: First backoff of a host after a pushback or failure, in seconds.
        host_backoff_max_s: Largest backoff of a host without Retry-After, in seconds.
        breaker_failures: Connection failures in a row that open the breaker (park the host).
        breaker_cooldown_s: Seconds a parked host waits before it is probed.
        breaker_parks: Parks after which the host is declared unreachable.
        autothrottle: Adapt each host's delay to its latency (`AutoThrottle`).
        max_delay_s: Largest delay AutoThrottle sets, in seconds.
        autothrottle_target_concurrency: Requests AutoThrottle aims to have in flight to one
            host on average (Scrapy's ``AUTOTHROTTLE_TARGET_CONCURRENCY``).
        max_pages_per_host: A host's page budget: most URLs of one host the frontier admits
            over the job's life (`crawlq.frontier.queue.WorkQueue.push`), or None.
    """

    default: HostPolicy = field(default_factory=HostPolicy)
    overrides: Mapping[str, HostPolicy] = field(default_factory=dict)
    max_crawl_delay_s: float = 30.0
    max_retry_after_s: float = 3600.0
    host_backoff_s: float = 1.0
    host_backoff_max_s: float = 300.0
    breaker_failures: int = 10
    breaker_cooldown_s: float = 60.0
    breaker_parks: int = 3
    autothrottle: bool = False
    max_delay_s: float = 60.0
    autothrottle_target_concurrency: float = 1.0
    max_pages_per_host: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Politeness:
        """The rules of ``settings`` (the one place both engines build host politeness)."""
        s = settings
        overrides = {
            host_name(host): HostPolicy(
                s.delay_s if delay_s is None else delay_s,
                s.host_concurrency if concurrency is None else concurrency,
            )
            for host, delay_s, concurrency in s.hosts
        }
        return cls(
            default=HostPolicy(s.delay_s, s.host_concurrency),
            overrides=overrides,
            max_crawl_delay_s=s.max_crawl_delay_s,
            max_retry_after_s=s.max_retry_after_s,
            host_backoff_s=s.host_backoff_s,
            host_backoff_max_s=s.host_backoff_max_s,
            breaker_failures=s.breaker_failures,
            breaker_cooldown_s=s.breaker_cooldown_s,
            breaker_parks=s.breaker_parks,
            autothrottle=s.autothrottle,
            max_delay_s=s.max_delay_s,
            autothrottle_target_concurrency=s.autothrottle_target_concurrency,
            max_pages_per_host=s.max_pages_per_host,
        )

    def configured(self, host: str) -> HostPolicy | None:
        """The override for ``host`` (or a parent domain), or None: the default applies.

        Args:
            host: Politeness key, ``host`` or ``host:port``.
        """
        if not self.overrides:
            return None
        name = host_name(host)
        while True:
            policy = self.overrides.get(name)
            if policy is not None:
                return policy
            dot = name.find(".")
            if dot < 0:
                return None
            name = name[dot + 1 :]

    def policy_for(self, host: str, crawl_delay_s: float | None = None) -> HostPolicy:
        """The host's politeness: its override or the default, raised by its Crawl-delay.

        Args:
            host: Politeness key.
            crawl_delay_s: The host's robots.txt ``Crawl-delay`` for our user agent, or None.
        """
        base = self.configured(host) or self.default
        if crawl_delay_s is None or crawl_delay_s <= base.delay_s:
            return base
        return HostPolicy(min(crawl_delay_s, self.max_crawl_delay_s), base.concurrency)

    def plan(self, strike: Strike, retry_after_s: float | None) -> StrikePlan:
        """The pause schedule of a strike (module docstring).

        Args:
            strike: The kind of strike.
            retry_after_s: The server's ``Retry-After`` in seconds, when it sent one.
        """
        if retry_after_s is not None:
            return StrikePlan((min(max(0.0, retry_after_s), self.max_retry_after_s),))
        if strike is Strike.PUSHBACK:
            return StrikePlan(self._backoff_schedule(_SCHEDULE_CAP))
        n = self.breaker_failures
        pauses = (*self._backoff_schedule(n - 1), self.breaker_cooldown_s)
        return StrikePlan(pauses, probe_from=n, down_from=n + self.breaker_parks)

    def dead_reason(self, strike: Strike, count: int, retry_after_s: float | None) -> str | None:
        """Why the URL that drew a strike is dead-lettered now instead of retried, or None.

        Args:
            strike: The kind of strike.
            count: Strikes of this kind in a row on the host, this one included, as the
                frontier counted them (`Frontier.host_strike`).
            retry_after_s: The server's ``Retry-After`` in seconds, when it sent one.
        """
        if retry_after_s is not None and retry_after_s > self.max_retry_after_s:
            return RETRY_AFTER_TOO_LONG
        if strike is Strike.FAILURE and count >= self.breaker_failures + self.breaker_parks:
            return HOST_UNREACHABLE
        return None

    def _backoff_schedule(self, entries: int) -> tuple[float, ...]:
        out: list[float] = []
        pause = self.host_backoff_s
        while len(out) < min(entries, _SCHEDULE_CAP):
            out.append(min(pause, self.host_backoff_max_s))
            pause *= 2
        return tuple(out)


class AutoThrottle:
    """One worker's AutoThrottle state (module docstring): when to write a host's new delay.

    Pure state, no I/O: the caller writes the policy `observe` returns to the frontier.

    Args:
        rules: The job's politeness rules (``autothrottle`` on).
        min_change: Relative change of a host's delay below which nothing is written (0.1:
            10 %), so that a steady host costs no frontier write per response.
        max_hosts: Hosts remembered; the oldest is forgotten beyond it.
    """

    def __init__(self, rules: Politeness, min_change: float = 0.1, max_hosts: int = 10_000) -> None:
        self.rules = rules
        self._min_change = min_change
        self._max_hosts = max_hosts
        self._delay_s: dict[str, float] = {}  # host -> delay this worker last computed
        self._written_s: dict[str, float] = {}  # host -> delay this worker last wrote

    def observe(
        self, host: str, latency_s: float, *, ok: bool, floor: HostPolicy
    ) -> HostPolicy | None:
        """Take one response's latency into the host's delay.

        Args:
            host: Politeness key.
            latency_s: Seconds from sending the request to the end of the response.
            ok: A 2xx or 3xx answer; other answers may raise the delay, never lower it.
            floor: The host's policy without AutoThrottle (configured delay raised by its
                Crawl-delay): the lower bound of the delay, and its concurrency.

        Returns:
            The policy to write for the host now, or None (no change worth a write).
        """
        current = self._delay_s.get(host, floor.delay_s)
        target = max(0.0, latency_s) / self.rules.autothrottle_target_concurrency
        new = (current + target) / 2
        if not ok:
            new = max(new, current)
        new = min(max(new, floor.delay_s), max(floor.delay_s, self.rules.max_delay_s))
        if host not in self._delay_s and len(self._delay_s) >= self._max_hosts:
            oldest = next(iter(self._delay_s))
            self._delay_s.pop(oldest)
            self._written_s.pop(oldest, None)
        self._delay_s[host] = new
        written = self._written_s.get(host, floor.delay_s)
        if abs(new - written) <= self._min_change * max(written, 0.01):
            return None
        self._written_s[host] = new
        return HostPolicy(new, floor.concurrency)


def rules_with_default(
    politeness: Politeness | None, default_policy: HostPolicy | None
) -> Politeness:
    """``politeness``, or rules whose only content is ``default_policy`` (for backends' open)."""
    if politeness is not None:
        return politeness
    return Politeness(default=default_policy or HostPolicy())
