"""The crawlq exception hierarchy: every error crawlq raises derives from `CrawlqError`.

```
CrawlqError
├── ConfigError              bad setting, option or spider path (Settings, CLI, load_spider)
├── InvalidURL               a URL that cannot be crawled (urls.normalize, CrawlRequest)
├── FrontierError
│   ├── FrontierUnavailable  backend cannot be reached (frontier backends)
│   │   └── BrokerUnavailable  the Celery broker cannot be reached (crawlq.celery)
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
    "FrontierLocked",
    "FrontierUnavailable",
    "InvalidURL",
    "LeaseLost",
    "PermanentFetchError",
    "PrivateAddressError",
    "RetryableStatus",
    "RobotsUnreachable",
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
    """Base for frontier backend errors."""


class FrontierUnavailable(FrontierError):
    """The frontier backend cannot be reached; callers retry with backoff."""


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
