"""The crawlq exception hierarchy: every error crawlq raises derives from `CrawlqError`.

```
CrawlqError                      (crawlq.errors.base)
├── ConfigError              bad setting, option or spider path (Settings, CLI, load_spider)
├── InvalidURL               a URL that cannot be crawled (urls.normalize, CrawlRequest)
├── FrontierError            (crawlq.errors.frontier) permanent unless said otherwise
│   ├── FrontierUnavailable  backend cannot be reached or not ready yet: transient, ride it out
│   │   └── BrokerUnavailable  the Celery broker cannot be reached (crawlq.celery)
│   ├── FrontierFull         Redis at its maxmemory refuses writes (crawlq.frontier.redis)
│   ├── JobGone              the job this process joined is gone or replaced (Redis frontier)
│   ├── QueueFullTimeout     a producer waited too long for room in a full frontier
│   ├── SeedInterrupted      seeding stopped part way; carries how many were queued
│   └── FrontierLocked       another live process owns an embedded frontier (SqliteFrontier)
├── StoreError               (crawlq.errors.store)
│   └── StoreUnavailable     store backend cannot be reached (store backends)
├── FetchError               (crawlq.errors.fetch) ``transient`` says whether to retry (Fetcher)
│   ├── TransientFetchError  timeout, reset, DNS failure: retry with backoff
│   │   ├── RetryableStatus  HTTP 408/429/5xx; carries ``retry_after_s``
│   │   ├── Retry            a downloader middleware asks for a retry (crawlq.middleware)
│   │   ├── RobotsUnreachable  robots.txt cannot be fetched; the page waits (RobotsCache)
│   │   ├── ProxyFailed      the proxy failed, not the target: another proxy (Fetcher)
│   │   └── ProxiesBenched   every usable proxy is benched: nothing sent (Fetcher)
│   └── PermanentFetchError  never retried, recorded as dead
│       ├── BodyTooLarge     body over ``max_body_bytes``
│       ├── TooManyRedirects redirect chain longer than the limit, or a loop
│       └── PrivateAddressError  the host resolves to a refused range (crawlq.web.addresses)
└── SpiderError              (crawlq.errors.spider) a callback failed or is missing (run_callback)
```

Each error carries the offending input (URL, setting name, job name, path) so its message names it,
with any password redacted (`crawlq.secrecy.redact`). Import them from here: the modules of
this package (one per family) are where they are written, not part of the API.
"""

from crawlq.errors.base import ConfigError, CrawlqError, InvalidURL
from crawlq.errors.fetch import (
    BodyTooLarge,
    FetchError,
    PermanentFetchError,
    PrivateAddressError,
    ProxiesBenched,
    ProxyFailed,
    Retry,
    RetryableStatus,
    RobotsUnreachable,
    TooManyRedirects,
    TransientFetchError,
)
from crawlq.errors.frontier import (
    BrokerUnavailable,
    FrontierError,
    FrontierFull,
    FrontierLocked,
    FrontierUnavailable,
    JobGone,
    QueueFullTimeout,
    SeedInterrupted,
)
from crawlq.errors.spider import SpiderError
from crawlq.errors.store import StoreError, StoreUnavailable

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
