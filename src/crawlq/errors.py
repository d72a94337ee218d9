"""The crawlq exception hierarchy: every error crawlq raises derives from `CrawlqError`.

```
CrawlqError
├── ConfigError              bad setting, option or spider path (Settings, CLI, load_spider)
├── InvalidURL               a URL that cannot be crawled (urls.normalize, CrawlRequest)
├── FrontierError            permanent unless said otherwise: retrying does not fix it
│   ├── FrontierUnavailable  backend cannot be reached or not ready yet: transient, ride it out
│   │   └── BrokerUnavailable  the Celery broker cannot be reached (crawlq.celery)
│   ├── FrontierFull         Redis at its maxmemory refuses writes (crawlq.frontier.redis)
│   ├── JobGone              the job this process joined is gone or replaced (Redis frontier)
│   ├── SeedInterrupted      seeding stopped part way; carries how many were queued
│   ├── FrontierLocked       another live process owns an embedded frontier (SqliteFrontier)
│   └── LeaseLost            ack/retry/renew of a lease the frontier no longer holds
├── StoreError
│   └── StoreUnavailable     store backend cannot be reached (store backends)
└── FetchError               a fetch failed; ``transient`` says whether to retry (Fetcher)
    ├── TransientFetchError  timeout, reset, DNS failure: retry with backoff
    │   ├── RetryableStatus  HTTP 408/429/5xx; carries ``retry_after_s``
    │   └── RobotsUnreachable  robots.txt cannot be fetched; the page waits (RobotsCache)
    └── PermanentFetchError  never retried, recorded as dead
        ├── BodyTooLarge     body over ``max_body_bytes``
        ├── TooManyRedirects redirect chain longer than the limit, or a loop
        └── PrivateAddressError  the host resolves to a refused range (crawlq.addresses)
```

Each error carries the offending input (URL, setting name, lease id) so its message names it,
with any password redacted (`crawlq.secrecy.redact`).
"""

from __future__ import annotations

from crawlq.secrecy import redact

__all__ = [
    "BodyTooLarge",
    "BrokerUnavailable",
    "ConfigError",
    "CrawlqError",
    "FetchError",
    "FrontierError",
    "FrontierFull",
    "FrontierLocked",
    "FrontierUnavailable",
    "InvalidURL",
    "JobGone",
    "LeaseLost",
    "PermanentFetchError",
    "PrivateAddressError",
    "QueueFullTimeout",
    "RetryableStatus",
    "RobotsUnreachable",
    "SeedInterrupted",
    "StoreError",
    "StoreUnavailable",
    "TooManyRedirects",
    "TransientFetchError",
]


class CrawlqError(Exception):
    """Root of every error crawlq raises.

    Its message never carries a password: text arguments go through `crawlq.secrecy.redact`,
    so a frontier, broker or store URL (or a driver's message echoing one) shows as
    ``redis://:***@host``, whichever path reports it.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class ConfigError(CrawlqError, ValueError):
    """A setting, CLI option or spider path is invalid.

    Raised by `crawlq.settings.Settings` and the CLI. ``name`` is the setting or option.
    """

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


class InvalidURL(CrawlqError, ValueError):
    """A URL that crawlq cannot fetch (no http/https scheme, no host, unparsable).

    Raised by `crawlq.urls.normalize` and so by `crawlq.request.CrawlRequest`.
    """

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"invalid URL {url!r}: {reason}")
        self.url = url
        self.reason = reason


class FrontierError(CrawlqError):
    """Base for frontier backend errors.

    Permanent unless it is a `FrontierUnavailable`: retrying the same operation will not
    succeed, so a worker stops on it (keeping its results) instead of retrying forever.
    """


class FrontierUnavailable(FrontierError):
    """The frontier backend cannot be reached or is not ready yet; callers retry with backoff.

    Transient: a connection failure or timeout, or Redis ``LOADING``/``BUSY``/``READONLY``.
    """


class FrontierFull(FrontierError):
    """Redis is at its ``maxmemory`` and refuses writes (``OOM``): permanent until an operator acts.

    Raised by the Redis frontier and the Celery engine's state (`crawlq.frontier.redis.errors`).
    ``job`` names the job; the message says what to do.
    """

    def __init__(self, job: str, detail: str) -> None:
        super().__init__(
            f"Redis is out of memory for job {job!r} ({detail}): it refuses writes at its "
            "maxmemory limit. Raise maxmemory (CONFIG SET maxmemory …, or maxmemory in "
            "redis.conf) or free memory on that Redis, then re-run: the job resumes where it "
            "stopped"
        )
        self.job = job


class JobGone(FrontierError):
    """The shared job this process joined is no longer on its Redis, or another replaced it.

    Every job gets a random id when it is created; each write to it checks that id first
    (`crawlq.frontier.redis`), so a process never writes into a job it did not join. The
    likely causes: Redis restarted without persistence, or the job's keys were deleted.
    ``job`` is the job name; ``joined`` the id this process joined; ``found`` the id there
    now (None: no job of that name).
    """

    def __init__(self, job: str, joined: str | None, found: str | None) -> None:
        if found is None:
            what = (
                f"job {job!r} is gone from its Redis (joined as id {joined}): Redis restarted "
                "without persistence, or the job's keys were deleted"
            )
        else:
            what = (
                f"job {job!r} was replaced on its Redis by a new job of that name (id {found}, "
                f"this process joined {joined}): Redis lost the old one (a restart without "
                "persistence, or the keys were deleted) and it was seeded again"
            )
        super().__init__(
            f"{what}. Nothing more is written to it; pages already stored are kept. Run "
            "Redis with appendonly yes, then seed the job again (re-running the same crawl "
            "or seed command) and restart the workers"
        )
        self.job = job
        self.joined = joined
        self.found = found


class QueueFullTimeout(FrontierError):
    """A producer waited ``max_push_wait_s`` for room in a full frontier (``max_queued``)."""

    def __init__(self, waited_s: float, max_queued: int | None) -> None:
        bound = f"max_queued {max_queued}" if max_queued is not None else "max_queued_per_host"
        super().__init__(
            f"the job's frontier stayed full ({bound}) for {waited_s:g}s: its workers drain it "
            "slower than it is fed"
        )
        self.waited_s = waited_s


class SeedInterrupted(FrontierError):
    """Seeding stopped part way: ``queued`` of ``given`` requests were queued before ``cause``.

    Raised by `crawlq.engine.service.seed`. Re-running the same seed resumes it: the job's
    dedup skips what is already queued.
    """

    def __init__(self, queued: int, given: int, cause: FrontierError) -> None:
        why = "waiting for room" if isinstance(cause, QueueFullTimeout) else "Redis refused"
        super().__init__(
            f"queued {queued} of {given} before {why}: {cause}; re-run the same "
            "command to resume (already-queued URLs are skipped)"
        )
        self.queued = queued
        self.given = given
        self.cause = cause


class BrokerUnavailable(FrontierUnavailable):
    """The Celery engine's broker cannot be reached or refused the login.

    Raised by `crawlq.celery.crawl` before seeding (so a failed start leaves no job behind)
    and when sending tasks; ``broker`` names the broker without its password.
    """

    def __init__(self, broker: str, detail: str) -> None:
        super().__init__(f"cannot reach the Celery broker {broker}: {detail}")
        self.broker = broker


class FrontierLocked(FrontierError):
    """An embedded frontier file is already used by another live process.

    Raised by `crawlq.frontier.sqlite.SqliteFrontier` at open; ``path`` names the file.
    """

    def __init__(self, path: str, holder: str) -> None:
        super().__init__(f"{path} is in use by another crawlq process ({holder})")
        self.path = path


class LeaseLost(FrontierError):
    """The lease expired and was handed to another worker (or was already settled)."""

    def __init__(self, lease_id: str) -> None:
        super().__init__(f"lease {lease_id} is no longer held")
        self.lease_id = lease_id


class StoreError(CrawlqError):
    """Base for result store errors."""


class StoreUnavailable(StoreError):
    """The store backend cannot be reached; callers keep results and retry."""


class FetchError(CrawlqError):
    """A fetch failed. ``reason`` is a short machine-readable code (``timeout``, ``http_503``).

    Raised by `crawlq.fetch.Fetcher.fetch`. ``transient`` tells the retry policy whether
    another attempt can succeed (see `crawlq.retry`).
    """

    transient: bool = False

    def __init__(self, url: str, reason: str, detail: str = "") -> None:
        text = f"{reason} fetching {url}"
        if detail:
            text += f": {detail}"
        super().__init__(text)
        self.url = url
        self.reason = reason
        self.detail = detail


class TransientFetchError(FetchError):
    """Connect/read timeout, connection reset, DNS failure: worth retrying."""

    transient = True


class RetryableStatus(TransientFetchError):
    """HTTP 408, 429 or 5xx. ``retry_after_s`` is the server's Retry-After, if any (seconds)."""

    def __init__(self, url: str, status: int, retry_after_s: float | None = None) -> None:
        super().__init__(url, f"http_{status}")
        self.status = status
        self.retry_after_s = retry_after_s


class RobotsUnreachable(TransientFetchError):
    """robots.txt could not be fetched (5xx, 408/429, network failure): the page waits.

    Raised by `crawlq.robots.RobotsCache`. ``requested`` is False when no request was sent for
    this error (a failure remembered from an earlier request): it counts no strike against the
    host (`crawlq.politeness.strike_of`).
    """

    def __init__(self, url: str, detail: str, *, requested: bool) -> None:
        super().__init__(url, "robots_unreachable", detail)
        self.requested = requested


class PermanentFetchError(FetchError):
    """A failure that another attempt will not fix; recorded as dead, never retried."""


class BodyTooLarge(PermanentFetchError):
    """The response body exceeds ``max_body_bytes``; nothing of it is stored."""

    def __init__(self, url: str, limit_bytes: int) -> None:
        super().__init__(url, "body_too_large", f"over {limit_bytes} bytes")
        self.limit_bytes = limit_bytes


class TooManyRedirects(PermanentFetchError):
    """The redirect chain exceeds the limit (this also ends redirect loops)."""

    def __init__(self, url: str, limit: int) -> None:
        super().__init__(url, "too_many_redirects", f"more than {limit}")
        self.limit = limit


class PrivateAddressError(PermanentFetchError):
    """The host is on a loopback, private, link-local… address (`crawlq.addresses`).

    Raised by `crawlq.fetch.Fetcher.fetch` before any connection to such an address, for the
    request's own host or any redirect hop's; the engine records the URL as filtered with
    reason ``private_address``. ``host`` is the refused host, ``range_name`` the range (the
    resolved address itself is not reported).
    """

    def __init__(self, url: str, host: str, range_name: str) -> None:
        super().__init__(url, "private_address", f"{host} is on a {range_name} address")
        self.host = host
        self.range_name = range_name
