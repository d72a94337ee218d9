"""The crawlq exception hierarchy: every error crawlq raises derives from `CrawlqError`.

```
CrawlqError                         root; its message is redacted (crawlq.secrecy.redact)
├── ConfigError                 L0  bad setting, option or spider path (Settings, CLI, load_spider)
│   └── NothingToSeed           L4  no seeds and no domains: the job would be unusable (seed)
├── InvalidURL                  L0  a URL that cannot be crawled (urls.normalize, CrawlRequest)
├── FrontierError               L1  permanent: a worker stops on it, keeping its results
│   ├── FrontierUnavailable     L1  backend unreachable or not ready: transient, ride it out
│   │   └── BrokerUnavailable   L5  the Celery broker cannot be reached (crawlq.celery)
│   ├── FrontierFull            L1  Redis at its maxmemory refuses writes (Redis frontier, Celery)
│   ├── JobGone                 L1  the job this process joined is gone or replaced (Redis)
│   ├── QueueFullTimeout        L1  a producer waited too long for room in a full frontier
│   ├── SeedInterrupted         L4  seeding stopped part way; carries how many were queued
│   └── FrontierLocked          L1  another live process owns an embedded frontier (SQLite)
├── StoreError                  L1  permanent: any other store failure
│   └── StoreUnavailable        L1  store backend unreachable: transient, keep results, retry
├── FetchError                  L2  ``transient`` says whether to retry (Fetcher)
│   ├── TransientFetchError     L2  timeout, reset, DNS failure: retry with backoff
│   │   ├── RetryableStatus     L2  HTTP 408/429/5xx; carries ``retry_after_s``
│   │   ├── Retry               L3  a downloader middleware asks for a retry (crawlq.middleware)
│   │   ├── RobotsUnreachable   L2  robots.txt cannot be fetched; the page waits (RobotsCache)
│   │   ├── ProxyFailed         L2  the proxy failed, not the target: another proxy (Fetcher)
│   │   └── ProxiesBenched      L2  every usable proxy is benched: nothing sent (Fetcher)
│   └── PermanentFetchError     L2  never retried, recorded as dead
│       ├── BodyTooLarge        L2  body over ``max_body_bytes``
│       ├── TooManyRedirects    L2  redirect chain longer than the limit, or a loop
│       └── PrivateAddressError L2  the host resolves to a refused range (web.addresses)
└── SpiderError                 L3  a callback failed or is missing (run_callback): not retried
```

The column is the layer that raises the error (docs/architecture.md: L0 values and pure
rules, L1 frontier and store, L2 fetch and robots, L3 spiders and middlewares, L4 the engines,
L5 entry points).

Transient or permanent: a `FetchError` says so in ``transient`` (`crawlq.rules.retry` retries
the transient ones with backoff and dead-letters the rest); `FrontierUnavailable` and
`StoreUnavailable` are outages that callers ride out with backoff; any other `FrontierError`
or `StoreError` is permanent. ``FetchError.reason`` is a short machine-readable code
(``timeout``, ``http_503``, ``body_too_large``) that the engine records with a dead letter or
a retry.

Each error carries the offending input (URL, setting name, job name, path) so its message
names it, with any password redacted (`crawlq.secrecy.redact`).
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
    "NothingToSeed",
    "PermanentFetchError",
    "PrivateAddressError",
    "ProxiesBenched",
    "ProxyFailed",
    "QueueFullTimeout",
    "Retry",
    "RetryableStatus",
    "RobotsUnreachable",
    "SeedInterrupted",
    "SpiderError",
    "StoreError",
    "StoreUnavailable",
    "TooManyRedirects",
    "TransientFetchError",
]


# -- the root, and invalid input (L0) -------------------------------------------------------------


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


class NothingToSeed(ConfigError):
    """A producer was given no seeds and no allowed domains for a job that does not exist.

    Raised by `crawlq.engine.seeding.seed` (``crawlq seed`` with no URL, or ``-`` on empty
    stdin) instead of creating the job: its scope would be empty, a worker refuses such a job
    and its settings cannot be changed once stored. Nothing was written. ``job`` names it.
    """

    def __init__(self, job: str) -> None:
        super().__init__(
            "allowed_domains",
            f"nothing to seed and no domains to scope job {job!r}: give seed URLs, or "
            "--allow-domain DOMAIN to create the job for producers that feed its inbox "
            "(no job was created)",
        )
        self.job = job


class InvalidURL(CrawlqError, ValueError):
    """A URL that crawlq cannot fetch (no http/https scheme, no host, unparsable).

    Raised by `crawlq.urls.normalize` and so by `crawlq.request.CrawlRequest`.
    """

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"invalid URL {url!r}: {reason}")
        self.url = url
        self.reason = reason


# -- frontier backends, the Celery broker, seeding (L1, L4, L5) -----------------------------------


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
    """Redis is at its ``maxmemory`` and refuses writes (``OOM``) until an operator acts.

    Raised by the Redis frontier and the Celery engine's state (`crawlq.frontier.redis.errors`)
    for a step that may grow memory (a push of new URLs, job creation); the steps that drain a
    job go on at ``maxmemory``, so a native worker keeps draining and counts the links it could
    not push (``frontier_full``, `crawlq.engine.outage.FullFrontier`). ``job`` names the job;
    the message says what to do.
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

    Raised by `crawlq.engine.seeding.seed`. Re-running the same seed resumes it: the job's
    dedup skips what is already queued.
    """

    def __init__(self, queued: int, given: int, cause: FrontierError) -> None:
        if isinstance(cause, FrontierFull):
            what = f"queued {queued} of {given}; {given - queued} refused: Redis is full. {cause}"
        else:
            why = "waiting for room" if isinstance(cause, QueueFullTimeout) else "Redis refused"
            what = f"queued {queued} of {given} before {why}: {cause}"
        super().__init__(
            f"{what}; re-run the same command to resume (already-queued URLs are skipped)"
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


# -- result stores (L1) ---------------------------------------------------------------------------


class StoreError(CrawlqError):
    """Base for result store errors."""


class StoreUnavailable(StoreError):
    """The store backend cannot be reached; callers keep results and retry."""


# -- a fetch, already classified transient or permanent (L2, L3) ----------------------------------


class FetchError(CrawlqError):
    """A fetch failed. ``reason`` is a short machine-readable code (``timeout``, ``http_503``).

    Raised by `crawlq.fetch.Fetcher.fetch`. ``transient`` tells the retry policy whether
    another attempt can succeed (see `crawlq.rules.retry`).
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
    host (`crawlq.rules.politeness.strike_of`).
    """

    def __init__(self, url: str, detail: str, *, requested: bool) -> None:
        super().__init__(url, "robots_unreachable", detail)
        self.requested = requested


class Retry(TransientFetchError):
    """A downloader middleware asks for another attempt at its request (a soft 404, a ban page).

    Raised by user code in ``process_request``, ``process_response`` or ``process_exception``
    (`crawlq.middleware`); the engine (`crawlq.engine.step`) gives it the request's URL
    and takes it through the retry policy like any transient failure (`crawlq.rules.retry.decide`:
    counted as an attempt, backoff with jitter, dead-lettered after ``max_retries`` with
    ``reason`` as the dead letter's reason). It is no strike against the host unless
    ``reason`` names a connection failure (``timeout``, ``connection_refused``...).

    Args:
        reason: Short code recorded with the retry and the dead letter (``soft_404``).
        detail: Human-readable description (default: none).
    """

    def __init__(self, reason: str, detail: str = "", *, url: str = "") -> None:
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"Retry needs a reason code, got {reason!r:.40}")
        super().__init__(url or "(a middleware's request)", reason, detail)


class ProxyFailed(TransientFetchError):
    """The proxy a fetch went through failed, not the target: another proxy may succeed.

    Raised by `crawlq.fetch.Fetcher.fetch` for a connection to the proxy that fails, a 407,
    a refused CONNECT tunnel or SOCKS handshake, and a 5xx whose ``Proxy-Status`` names an
    error of the proxy itself (`crawlq.rules.proxies` lists what counts). The engine counts it
    against the proxy in the frontier (`crawlq.rules.proxies.ProxyState`) and gives the lease
    back without spending an attempt. ``proxy_id`` identifies the proxy (a hash of its
    ``scheme://host:port``); the message never holds its credentials.
    """

    def __init__(self, url: str, proxy_id: str, reason: str, detail: str = "") -> None:
        super().__init__(url, reason, detail)
        self.proxy_id = proxy_id


class ProxiesBenched(TransientFetchError):
    """Every proxy this fetch could use is benched: no request was sent.

    Raised by `crawlq.fetch.Fetcher.fetch`; ``until_ms`` is the Unix ms the first of them
    comes back. The engine waits and gives the lease back (no attempt spent).
    """

    def __init__(self, url: str, until_ms: int) -> None:
        super().__init__(url, "proxies_benched", "every proxy is benched")
        self.until_ms = until_ms


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
    """The host is on a loopback, private, link-local… address (`crawlq.web.addresses`).

    Raised by `crawlq.fetch.Fetcher.fetch` before any connection to such an address, for the
    request's own host or any redirect hop's; the engine records the URL as filtered with
    reason ``private_address``. ``host`` is the refused host, ``range_name`` the range (the
    resolved address itself is not reported).
    """

    def __init__(self, url: str, host: str, range_name: str) -> None:
        super().__init__(url, "private_address", f"{host} is on a {range_name} address")
        self.host = host
        self.range_name = range_name


# -- a spider callback (L3) -----------------------------------------------------------------------


class SpiderError(CrawlqError):
    """A spider callback failed, is missing, or produced something that is not an item/request.

    Raised by `crawlq.spider.run_callback` (and `crawlq.spider.start_callback`); the engine
    records it as the page's error (`crawlq.records.spider_error`, from its ``kind`` and
    ``detail``) and does not retry the page.

    Attributes:
        url: The response URL the callback was given.
        callback: The callback method name.
        reason: What went wrong.
        kind: What the error is, for counting: the class name of the exception the callback
            raised (``KeyError``), ``TypeError`` for a value that is neither an item nor a
            request, ``MissingCallback`` for a callback the spider does not have.
        detail: ``reason`` without the kind (the exception's own message).
    """

    def __init__(
        self,
        url: str,
        callback: str,
        reason: str,
        *,
        kind: str = "SpiderError",
        detail: str | None = None,
    ) -> None:
        super().__init__(f"callback {callback!r} on {url}: {reason}")
        self.url = url
        self.callback = callback
        self.reason = reason
        self.kind = kind
        self.detail = reason if detail is None else detail

    @classmethod
    def raised(cls, url: str, callback: str, exc: BaseException) -> SpiderError:
        """The error for a callback that raised ``exc`` (chain it as the ``__cause__``)."""
        kind = type(exc).__name__
        return cls(url, callback, f"{kind}: {exc}", kind=kind, detail=str(exc))
