"""Crawl settings: one frozen, typed object with a documented precedence.

Precedence, lowest first (later sources override earlier ones):

1. the defaults below;
2. a TOML file (``--config FILE``; keys are the field names);
3. the spider's ``custom_settings`` dict;
4. environment variables ``CRAWLQ_<FIELD NAME IN UPPER CASE>`` (``CRAWLQ_DELAY_S=0.5``);
5. command-line options.

Unknown keys are an error (`ConfigError` naming the key and suggesting the closest names,
as `suggest` does), never silently dropped. Every number carries its unit in its name
(``_s`` seconds, ``_bytes`` bytes). ``crawlq settings`` lists them all.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import re
import tomllib
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from crawlq import __version__
from crawlq.errors import ConfigError

__all__ = [
    "DEFAULT_SKIP_EXTENSIONS",
    "DEFAULT_USER_AGENT",
    "JOB_NAME_RULE",
    "Settings",
    "check_job_name",
    "check_store",
    "coerce_settings",
    "parse_bytes",
    "suggest",
]

DEFAULT_USER_AGENT = "crawlq/" + ".".join(__version__.split(".")[:2])
"""The default ``user_agent``: ``crawlq/<major>.<minor>`` of `crawlq.__version__`."""
_ENV_PREFIX = "CRAWLQ_"
_MAX_S = 1e7
"""Largest value of any setting in seconds (about 115 days): larger ones are typos, and
would overflow the frontier's integer milliseconds."""
_JOB_NAME_MAX = 200
_JOB_NAME_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:-]{{0,{_JOB_NAME_MAX - 1}}}")
JOB_NAME_RULE = (
    f"1 to {_JOB_NAME_MAX} ASCII letters, digits and . _ : - starting with a letter or digit"
)
"""What a job name may be: it is spelled into Redis keys (inside the ``{…}`` hash tag and
their SCAN pattern), log lines and worker command lines, so no braces, glob characters,
spaces, control or non-ASCII characters, and no leading dash (it would read as an option)."""
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


DEFAULT_SKIP_EXTENSIONS: tuple[str, ...] = (
    # images
    "ai", "avif", "bmp", "cr2", "eps", "gif", "heic", "heif", "ico", "jfif", "jpe",
    "jpeg", "jpg", "nef", "png", "psd", "raw", "svg", "svgz", "tif", "tiff", "webp",
    # audio
    "aac", "aif", "aiff", "amr", "flac", "m4a", "mid", "midi", "mka", "mp3", "oga",
    "ogg", "opus", "ra", "wav", "weba", "wma",
    # video
    "3g2", "3gp", "asf", "avi", "flv", "m2ts", "m4v", "mkv", "mov", "mp4", "mpeg",
    "mpg", "mts", "ogv", "qt", "rm", "swf", "ts", "vob", "webm", "wmv",
    # styles, scripts, source maps, fonts
    "css", "js", "map", "mjs", "eot", "otf", "ttf", "woff", "woff2",
    # archives, packages, disk images, binaries
    "7z", "apk", "bin", "bz2", "cab", "deb", "dll", "dmg", "exe", "gz", "img", "iso",
    "jar", "lz", "lzma", "msi", "rar", "rpm", "so", "tar", "tbz", "tbz2", "tgz", "txz",
    "war", "whl", "xz", "z", "zip", "zst",
    # office documents, e-books, PDF
    "doc", "docm", "docx", "epub", "key", "mobi", "numbers", "odg", "odp", "ods",
    "odt", "pages", "pdf", "pps", "ppsx", "ppt", "pptm", "pptx", "ps", "rtf", "xls",
    "xlsm", "xlsx",
)  # fmt: skip
"""The default of ``skip_extensions``: path extensions (lower case, no dot) of links that
the page's link extraction leaves out (`crawlq.links.extract_links`)."""


def check_job_name(name: str) -> str:
    """Return ``name`` if it is a valid job name (`JOB_NAME_RULE`).

    Raises:
        ConfigError: ``name`` breaks the rule; the error names the setting ``job``.
    """
    if not _JOB_NAME_RE.fullmatch(name):
        shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
        raise ConfigError("job", f"a job name must be {JOB_NAME_RULE}; got {shown}")
    return name


_STORE_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")
_LIBPQ_KEYS = (
    "host|hostaddr|port|dbname|user|password|passfile|service|options|sslmode|sslcert|sslkey"
    "|sslrootcert|sslpassword|connect_timeout|application_name|target_session_attrs"
    "|channel_binding|gssencmode|krbsrvname|requirepeer|client_encoding|keepalives"
)
_KEY_VALUE = re.compile(rf"(?i)(?:^|\s)(?:{_LIBPQ_KEYS})\s*=")
"""A libpq ``key=value`` connection string: a word of it starts with a libpq keyword and
``=`` (a file name such as ``crawl=1.db`` is still a path)."""


def check_store(store: str) -> str:
    """Return ``store`` if it names a store: a path, ``sqlite:///PATH`` or ``postgresql://…``.

    ``postgres://…`` is accepted too. Anything else is refused rather than taken for a file
    name: a libpq ``key=value`` string (``host=db password=x dbname=y``) would otherwise
    become a SQLite file named after the password. The message never repeats the password.

    Raises:
        ConfigError: Neither a path nor a supported URL; the error names ``store``.
    """
    if store.startswith(_STORE_SCHEMES):
        return store
    if "://" in store or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", store):
        raise ConfigError(
            "store",
            f"unsupported store URL {store!r}: use a file path, sqlite:///PATH or postgresql://…",
        )
    if _KEY_VALUE.search(store):
        raise ConfigError(
            "store",
            "a key=value connection string is neither a file path nor a URL: give "
            "postgresql://USER@HOST:PORT/DB (a password goes after USER and a colon) or a "
            "SQLite file path",
        )
    if not store.strip():
        raise ConfigError("store", f"no file path in store URL {store!r}")
    return store


def parse_bytes(value: str | int) -> int:
    """Parse a byte size: an int, or a string such as ``"10MiB"``, ``"500 kB"``, ``"2048"``.

    Raises:
        ValueError: not a size.
    """
    if isinstance(value, int):
        return value
    match = _SIZE_RE.match(value)
    if not match:
        raise ValueError(f"not a byte size: {value!r} (try 10MiB or 1048576)")
    number, unit = match.groups()
    return int(float(number) * _SIZE_UNITS[(unit or "b").lower()])


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything that shapes a crawl. Build with `Settings.build`; fields are read-only."""

    store: str = "crawlq.db"
    """Where results (and the embedded frontier) live: a SQLite file path (the embedded
    default), ``sqlite:///PATH`` or ``postgresql://user[:password]@host:port/db``; anything
    else (a libpq ``key=value`` string, another scheme) is refused (`check_store`)."""

    max_pages: int | None = None
    """Stop leasing new work after this many pages are stored (None: no limit)."""

    max_depth: int | None = None
    """Do not follow links deeper than this from the seeds (seeds are depth 0; None: no limit)."""

    max_queued: int | None = None
    """Most requests the job's frontier holds queued (waiting for a lease; None: no bound).
    What happens at the bound is ``when_full`` (`crawlq.frontier.base.QueueBounds`)."""

    max_queued_per_host: int | None = None
    """Most requests queued for one host (None: no bound); see ``max_queued``."""

    when_full: str = "block"
    """At a ``max_queued`` bound: ``block`` (producers wait for room; links found by workers
    are still queued) or ``drop-lowest`` (the lowest-priority request of the host's queue,
    maybe the new one, is dead-lettered as ``frontier_full``)."""

    max_push_wait_s: float | None = None
    """Longest a producer (``crawlq seed``, the Python API) waits for room in a full frontier
    before it stops with what it queued so far, in seconds (None: as long as it takes)."""

    concurrency: int = 16
    """Requests in flight at once in one worker process."""

    host_concurrency: int = 1
    """Requests in flight at once to one host, across all workers."""

    delay_s: float = 1.0
    """Seconds between the starts of two requests to one host, across all workers."""

    timeout_s: float = 30.0
    """Total seconds allowed for one fetch (connect, headers and body)."""

    connect_timeout_s: float = 10.0
    """Seconds allowed to open a connection."""

    max_retries: int = 3
    """Retries of a transient failure before the URL is dead-lettered (so at most 1 + this)."""

    retry_delay_s: float = 1.0
    """Backoff base in seconds: retry ``k`` waits about ``retry_delay_s * 2**(k-1)``, jittered."""

    retry_max_delay_s: float = 300.0
    """Upper bound of one backoff wait in seconds, Retry-After included."""

    user_agent: str = DEFAULT_USER_AGENT
    """User-Agent header, also the product token matched against robots.txt groups."""

    cookies_enabled: bool = True
    """Keep cookies (``--no-cookies`` turns it off): each worker process keeps a cookie jar
    per job (never shared across jobs, workers or machines) and sends its cookies back as a
    browser would; a request's own ``cookies`` are sent, and the cookies a redirect sets
    travel with its queued target (see README "Cookies"). Off: no jar, no cookies sent."""

    obey_robots: bool = True
    """Fetch robots.txt per host and skip disallowed URLs (RFC 9309)."""

    robots_ttl_s: float = 86400.0
    """Seconds a fetched robots.txt is used before it is fetched again, by every worker of
    the job (one fetch per origin per job); at most 86400 (RFC 9309 §2.4: 24 hours)."""

    follow_sitemaps: bool = False
    """Read the sitemaps that each host's robots.txt names in ``Sitemap:`` lines
    (``--follow-sitemaps``; `crawlq.sitemap`): once per job, when a worker first loads the
    file. Needs ``obey_robots`` (robots.txt is not fetched without it)."""

    allowed_domains: tuple[str, ...] = ()
    """Hosts (and their subdomains) whose links are followed; empty: the seeds' hosts."""

    allow_private: bool = False
    """Allow requests to loopback, private, link-local and other non-public addresses on
    any host (``--allow-private``). Off: such a request is refused and its URL recorded as
    filtered ``private_address``, except on a seed host (see `crawlq.addresses`)."""

    seed_hosts: tuple[str, ...] = ()
    """Hosts exempt from the private-address guard: the crawl's seed hosts. Producers
    (``crawl``, ``seed``, the Python API) fill it from their seeds; with a shared job the
    first producer's value is the job's."""

    include: tuple[str, ...] = ()
    """Regexes: when any is given, only URLs matching one of them are followed."""

    exclude: tuple[str, ...] = ()
    """Regexes: URLs matching any of them are not followed."""

    strip_url_params: tuple[str, ...] = ("jsessionid", "phpsessid", "sid", "sessionid", "utm_*")
    """Query parameters (``?sid=…``) and path parameters (``;jsessionid=…``) removed from every
    URL that enters the crawl (links, redirect targets, seeds, inbox entries), before it is
    fingerprinted and requested: names or globs (``utm_*``), matched without regard to case
    (`crawlq.urls.UrlRules`). So a site that mints a new session id in every link offers one
    URL per page. Empty: nothing is removed."""

    max_path_repeats: int | None = 2
    """Crawler trap: a link whose path repeats one sequence of segments more than this many
    times in a row (``/a/b/a/b/a/b/`` is ``[a, b]`` three times) is not followed (filtered
    ``repeated_segments``). None: no limit."""

    max_query_params: int | None = 20
    """Crawler trap: a link with more query parameters than this is not followed (filtered
    ``too_many_query_params``). None: no limit."""

    max_pages_per_host: int | None = None
    """Per-host page budget: at most this many URLs of one host (``host:port``) are admitted
    into the crawl, across all workers (counted by the frontier as new URLs are pushed);
    later new URLs of that host are not queued and are counted as ``max_pages_per_host``
    (not recorded one by one). None: no budget."""

    max_body_bytes: int = 10 * 1024 * 1024
    """Largest response body accepted, in bytes; a larger one is dead-lettered, not stored."""

    max_html_depth: int = 512
    """Most levels of nested elements an HTML page may have; a deeper page is stored with
    ``error`` = ``html_too_deep`` and neither parsed nor given to the spider (parsing time
    grows with the square of the depth; the checked depth is an estimate made before parsing,
    `crawlq.links.html_depth_over`). Real pages nest a few dozen levels; Chromium's parser
    stops nesting at 512."""

    max_links_per_page: int = 10_000
    """Most links taken from one page: a page with more ``<a>``/``<area>`` tags is parsed only
    up to the first one over the cap, and at most this many of the requests a callback yields
    are followed; the page's ``error`` says ``links_capped: N of M``. Bounds the memory one
    page takes (lexbor's tree costs about 650 bytes per element)."""

    parse_timeout_s: float = 10.0
    """Seconds one page's parse and synchronous spider callback may run (on a page thread, off
    the event loop); past it the page is stored with ``error`` = ``parse_timeout`` and the
    thread is abandoned to finish in the background."""

    max_redirects: int = 10
    """Redirect hops followed from one request before giving up (each hop is queued as its
    own request: see README "Redirects")."""

    meta_refresh: bool = True
    """Follow an HTML ``<meta http-equiv="refresh" content="N; url=...">`` as a redirect: the
    page is stored and its target queued as a hop of its own, counted against
    ``max_redirects`` (README "What pages say"). Off: such pages are parsed as any other."""

    meta_refresh_max_delay_s: float = 100.0
    """A meta refresh whose delay is longer than this many seconds is not followed (the
    page is parsed as any other); Scrapy's ``METAREFRESH_MAXDELAY`` is 100 s too."""

    skip_extensions: tuple[str, ...] = DEFAULT_SKIP_EXTENSIONS
    """Path extensions (no dot, any case) of links that the page's link extraction leaves
    out, counted as ``extension`` in the summary's links not followed; empty: none left
    out. Default: `DEFAULT_SKIP_EXTENSIONS` (images, audio, video, styles, scripts, fonts,
    archives, office documents, PDF). Requests a spider yields itself are not checked."""

    max_crawl_delay_s: float = 30.0
    """Largest robots.txt ``Crawl-delay`` honoured, in seconds (a longer one is capped)."""

    max_retry_after_s: float = 3600.0
    """Largest ``Retry-After`` honoured, in seconds; a server asking for longer gets its host
    paused this long and the URL dead-lettered as ``retry_after_too_long``."""

    host_backoff_s: float = 1.0
    """First pause, in seconds, of a host that answered 429/503 without ``Retry-After`` or
    failed to connect; doubles with each such answer in a row."""

    host_backoff_max_s: float = 300.0
    """Longest pause, in seconds, of the host backoff without ``Retry-After``."""

    breaker_failures: int = 10
    """Connection failures in a row after which a host is parked (circuit breaker)."""

    breaker_cooldown_s: float = 60.0
    """Seconds a parked host waits before it is probed with one request."""

    breaker_parks: int = 3
    """Parks after which a host is declared unreachable: its URLs are dead-lettered as
    ``host_unreachable``."""

    autothrottle: bool = False
    """Adapt each host's delay to its response latency (Scrapy's AutoThrottle, shared by all
    workers through the frontier), between ``delay_s`` and ``max_delay_s``."""

    max_delay_s: float = 60.0
    """Largest per-host delay AutoThrottle sets, in seconds."""

    autothrottle_target_concurrency: float = 1.0
    """Requests AutoThrottle aims to have in flight to one host on average."""

    hosts: tuple[tuple[str, float | None, int | None], ...] = ()
    """Per-host politeness overrides as ``(host, delay_s, concurrency)`` (None keeps the
    default); in a settings file ``[hosts."example.com"]`` with ``delay_s`` and
    ``concurrency``. A host's override applies to its subdomains too."""

    visibility_timeout_s: float = 0.0
    """Seconds before an unacked task or lease returns to the queue when nothing says its
    worker is alive; 0: 4 x ``timeout_s``. On the Redis frontier a worker's leases return
    sooner, once its heartbeat is stale (``worker_stale_s``): this only caps that hold. On a
    Celery Redis broker it is the broker's visibility timeout (`crawlq.celery.config`)."""

    heartbeat_s: float = 5.0
    """Seconds between a worker's heartbeats: a native worker renews its leases with each one
    (also while it downloads), a Celery worker process records one in the job's Redis."""

    stale_after_beats: int = 3
    """Heartbeats a worker may miss before it counts as dead (``worker_stale_s``): its leases,
    and the politeness slots they hold, go back to the queue at once, and the URLs a dead
    Celery worker was running are sent again."""

    lease_batch: int = 64
    """Most leases taken from the frontier in one call."""

    store_body: bool = False
    """Keep each page's body (after content decoding) in the store; ``crawlq export --body``
    exports it."""

    warc_dir: str | None = None
    """Directory where each worker process archives the request and response of every fetched
    page to gzip-compressed WARC 1.1 files (None: no archive). Created when missing; a
    relative path is made absolute when the settings are built."""

    warc_max_size_bytes: int = 1_000_000_000
    """A WARC file is closed, and the next one started, once it reaches this many bytes."""

    flush_max_items: int = 64
    """Finished URLs (pages, dead letters, filtered) a worker buffers before it writes them
    to the store in one batch."""

    flush_interval_s: float = 0.05
    """Longest time in seconds a finished URL waits in the buffer while the worker is busy
    (an idle worker writes at once)."""

    spider: str | None = None
    """Spider as ``module:Class`` (None: the default spider, which follows every link)."""

    trust_job_code: bool = False
    """Shared job: take ``spider``, ``warc_dir`` and a SQLite ``store`` path from the job's
    settings in Redis when this process does not give them itself (otherwise that is an
    error: whoever can write the job's keys would choose the code this process runs and the
    files it writes; see `crawlq.engine.job`). A per-process setting, never a job's."""

    inbox_methods: tuple[str, ...] = ("GET", "HEAD")
    """Shared job: HTTP methods an inbox entry may ask for; others are rejected."""

    inbox_bypass_scope: bool = False
    """Shared job: queue inbox entries outside the job's scope (allowed domains, include,
    exclude, max depth) instead of rejecting them as ``out_of_scope``."""

    inbox_max_entry_bytes: int = 64 * 1024
    """Shared job: largest inbox entry accepted, in bytes; a larger one is rejected unread."""

    frontier: str | None = None
    """Where the frontier lives: None for the embedded one in ``store``'s SQLite file, or
    ``redis://[:password@]host:port/db`` for one shared by workers on many machines."""

    job: str | None = None
    """Name of the crawl job on a shared frontier (default: derived from the seeds)."""

    bloom_capacity: int | None = None
    """Shared frontier only: dedup with a Bloom filter sized for this many URLs instead of the
    exact seen set (fixed when the job is created; see `crawlq.frontier.redis.BloomDedup`)."""

    bloom_error_rate: float = 0.001
    """False-positive rate of the Bloom filter at ``bloom_capacity`` URLs (0 < p < 1)."""

    broker_url: str | None = None
    """Celery engine: the broker, ``redis://host:port/db`` or ``amqp://user:pass@host:port/vhost``
    (see `crawlq.celery`). Its dedup and politeness state lives in ``frontier`` (default: the
    broker itself when it is Redis)."""

    celery_queue: str = "crawlq"
    """Celery engine: the queue (and exchange and routing key) of the ``scrape`` tasks."""

    celery_batch: int = 16
    """Celery engine: most URLs one task carries (discovered links are grouped by host and
    priority into tasks of up to this many; 1 gives one task per URL)."""

    log_interval_s: float = 30.0
    """Seconds between two progress lines (pages, pages/s, queued, in flight, errors) that
    ``crawl`` and ``worker`` log when stderr is not a terminal (a terminal gets the live
    display instead). Per process, never a job setting."""

    log_format: str = "text"
    """Log lines on stderr: ``text`` (timestamped lines) or ``json`` (one JSON object per
    line, for log pipelines). Per process."""

    metrics_port: int | None = None
    """TCP port on which ``crawl`` and ``worker`` (and a Celery worker, from
    ``CRAWLQ_METRICS_PORT``) serve Prometheus metrics at ``/metrics`` (None: no endpoint).
    Per process; a ``--processes P`` supervisor serves its children's metrics summed."""

    metrics_host: str = "127.0.0.1"
    """Address the metrics endpoint binds (``0.0.0.0`` for every interface)."""

    explicit: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    """Names of the settings given explicitly (file, spider, environment, command line),
    as opposed to defaults; set by `build`. Not a setting itself."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f.name, f"must be a finite number, got {value}")
            if f.name.endswith("_s") and isinstance(value, int | float) and value > _MAX_S:
                raise ConfigError(f.name, f"must be at most {_MAX_S:g} seconds, got {value}")
        positive = (
            "concurrency",
            "host_concurrency",
            "lease_batch",
            "max_redirects",
            "celery_batch",
            "flush_max_items",
            "breaker_failures",
            "breaker_parks",
            "inbox_max_entry_bytes",
            "max_html_depth",
            "max_links_per_page",
            "stale_after_beats",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be at least 1, got {getattr(self, name)}")
        if self.warc_dir is not None:
            if not self.warc_dir.strip():
                raise ConfigError("warc_dir", "must not be empty")
            object.__setattr__(self, "warc_dir", os.path.abspath(self.warc_dir))
        delays = ("delay_s", "retry_delay_s", "visibility_timeout_s", "flush_interval_s")
        for name in (*delays, "max_retries"):
            if getattr(self, name) < 0:
                raise ConfigError(name, f"must not be negative, got {getattr(self, name)}")
        for name in (
            "timeout_s",
            "connect_timeout_s",
            "max_body_bytes",
            "retry_max_delay_s",
            "warc_max_size_bytes",
            "max_crawl_delay_s",
            "max_retry_after_s",
            "host_backoff_s",
            "host_backoff_max_s",
            "breaker_cooldown_s",
            "max_delay_s",
            "autothrottle_target_concurrency",
            "parse_timeout_s",
            "heartbeat_s",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(name, f"must be positive, got {getattr(self, name)}")
        if self.log_format not in ("text", "json"):
            raise ConfigError("log_format", f"must be text or json, got {self.log_format!r}")
        if self.log_interval_s <= 0:
            raise ConfigError("log_interval_s", f"must be positive, got {self.log_interval_s}")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ConfigError("metrics_port", f"must be in 0..65535, got {self.metrics_port}")
        if not 0 < self.robots_ttl_s <= 86400:
            raise ConfigError(
                "robots_ttl_s", f"must be in (0, 86400] (RFC 9309 §2.4), got {self.robots_ttl_s}"
            )
        if self.follow_sitemaps and not self.obey_robots:
            raise ConfigError(
                "follow_sitemaps",
                "reads the Sitemap: lines of robots.txt, which is not fetched when obey_robots "
                "is off (--ignore-robots); give the sitemaps with --sitemap instead",
            )
        for name in ("max_queued", "max_queued_per_host"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(name, f"must be at least 1, got {value}")
        if self.when_full not in ("block", "drop-lowest"):
            raise ConfigError("when_full", f"must be block or drop-lowest, got {self.when_full!r}")
        if self.max_push_wait_s is not None and self.max_push_wait_s < 0:
            raise ConfigError(
                "max_push_wait_s", f"must not be negative, got {self.max_push_wait_s}"
            )
        for name in ("max_pages", "max_depth", "max_query_params"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(name, f"must not be negative, got {value}")
        for name in ("max_path_repeats", "max_pages_per_host"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(name, f"must be at least 1 (or none), got {value}")
        params = tuple(p.strip() for p in self.strip_url_params if p.strip())
        for param in params:
            if any(c in param for c in "=&;/#"):
                raise ConfigError(
                    "strip_url_params", f"not a parameter name or glob: {param!r:.60}"
                )
        object.__setattr__(self, "strip_url_params", params)
        if self.job is not None:
            check_job_name(self.job)
        check_store(self.store)
        methods = tuple(m.strip().upper() for m in self.inbox_methods)
        for method in methods:
            if not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Z]+", method):
                raise ConfigError("inbox_methods", f"not an HTTP method: {method!r:.40}")
        object.__setattr__(self, "inbox_methods", methods)
        object.__setattr__(self, "skip_extensions", _extensions(self.skip_extensions))
        if self.meta_refresh_max_delay_s < 0:
            raise ConfigError(
                "meta_refresh_max_delay_s",
                f"must not be negative, got {self.meta_refresh_max_delay_s}",
            )
        for name in ("include", "exclude"):
            for pattern in getattr(self, name):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(name, f"bad regex {pattern!r}: {exc}") from exc

    @property
    def effective_visibility_timeout_s(self) -> float:
        """The visibility timeout leases get, in seconds.

        ``visibility_timeout_s`` when set, else 4 x ``timeout_s``.
        """
        return self.visibility_timeout_s or 4 * self.timeout_s

    @property
    def worker_stale_s(self) -> float:
        """Seconds without a heartbeat after which a worker counts as dead.

        ``heartbeat_s`` x ``stale_after_beats``: 15 s by default.
        """
        return self.heartbeat_s * self.stale_after_beats

    @property
    def lease_hold_s(self) -> float:
        """Seconds a lease is held past its worker's last heartbeat (renewal).

        The smaller of ``worker_stale_s`` and the visibility timeout. A worker renews its
        leases every ``heartbeat_s`` (at most a third of this), so a live worker keeps them for
        as long as it works on them, and a dead one's return to the queue this long after its
        last beat.
        """
        return min(self.effective_visibility_timeout_s, self.worker_stale_s)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Every setting name, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name != "explicit")

    @classmethod
    def build(
        cls,
        *,
        file: str | Path | None = None,
        spider_settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        cli: Mapping[str, Any] | None = None,
    ) -> Settings:
        """Merge the sources in precedence order (module docstring) and validate.

        Args:
            file: A TOML file of ``name = value`` pairs, or None.
            spider_settings: The spider's ``custom_settings``.
            env: Environment mapping (``os.environ`` when None); only ``CRAWLQ_*`` keys count.
            cli: Values given on the command line; ``None`` values mean "not given".

        Raises:
            ConfigError: An unknown key, a value of the wrong type or out of range, or an
                unreadable file; the message names the key and the source.
        """
        merged: dict[str, Any] = {}
        if file is not None:
            try:
                with open(file, "rb") as fh:
                    data = tomllib.load(fh)
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(str(file), f"cannot read settings file: {exc}") from exc
            merged.update(_coerce_all(data, f"settings file {file}"))
        if spider_settings:
            merged.update(_coerce_all(spider_settings, "spider custom_settings"))
        environ = os.environ if env is None else env
        env_values = {
            key[len(_ENV_PREFIX) :].lower(): value
            for key, value in environ.items()
            if key.startswith(_ENV_PREFIX) and not key.startswith(_ENV_PREFIX + "TEST_")
        }
        merged.update(_coerce_all(env_values, "environment CRAWLQ_*", _env_name))
        if cli:
            merged.update(
                _coerce_all({k: v for k, v in cli.items() if v is not None}, "command line")
            )
        return cls(**merged, explicit=frozenset(merged))


def _extensions(values: tuple[str, ...]) -> tuple[str, ...]:
    """``skip_extensions`` lower-cased, without a leading dot, each once, in order.

    Raises:
        ConfigError: An entry is empty or holds a dot, slash or whitespace inside (an
            extension is what follows the last dot of a path: ``gz``, not ``tar.gz``).
    """
    out: dict[str, None] = {}
    for value in values:
        ext = value.strip().lower().removeprefix(".")
        if not ext or any(c in ext for c in "./\\?#") or len(ext.split()) != 1:
            raise ConfigError(
                "skip_extensions",
                f"not a path extension: {value!r:.40} (give e.g. pdf or gz, without a dot)",
            )
        out[ext] = None
    return tuple(out)


_HINTS: dict[str, Any] = {}
_UNIT_SUFFIXES = ("_s", "_bytes")


def suggest(name: str, *, limit: int = 3) -> list[str]:
    """The setting names closest to an unknown ``name``, best first (possibly none).

    A name missing only its unit (``delay`` for ``delay_s``, ``max_body`` for
    ``max_body_bytes``) is the one answer; else close spellings (`difflib`).
    """
    names = Settings.field_names()
    key = name.strip().lower().replace("-", "_")
    with_unit = [key + suffix for suffix in _UNIT_SUFFIXES if key + suffix in names]
    if with_unit:
        return with_unit
    close = difflib.get_close_matches(key, names, n=limit, cutoff=0.6)
    return [n for n in close if n != key]


def _env_name(name: str) -> str:
    return f"{_ENV_PREFIX}{name.upper()}"


def coerce_settings(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Setting values from ``source`` converted to their types (as `Settings.build` does).

    For values read from shared state (a job's stored settings), which may hold anything.

    Raises:
        ConfigError: An unknown name or a value of the wrong type; the message names the
            setting and ``source``.
    """
    return _coerce_all(values, source)


def _coerce_all(
    values: Mapping[str, Any], source: str, spell: Callable[[str], str] = str
) -> dict[str, Any]:
    """Coerce ``values`` from ``source`` to the settings' types.

    ``spell`` writes a setting name as that source does (``CRAWLQ_DELAY_S`` in the
    environment), for the suggestions of an unknown one.
    """
    if not _HINTS:
        _HINTS.update(get_type_hints(Settings))
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name not in _HINTS or name == "explicit":
            close = suggest(name)
            hint = f"; did you mean {' or '.join(spell(n) for n in close)}?" if close else ""
            raise ConfigError(
                name,
                f"unknown setting (from {source}){hint} (`crawlq settings` lists them all)",
            )
        if name == "job" and isinstance(value, str):
            out[name] = value  # verbatim: "" or "none" is a bad name, not "no job"
            continue
        try:
            if name == "hosts":
                out[name] = _coerce_hosts(value)
                continue
            out[name] = _coerce(_HINTS[name], value, name)
        except (TypeError, ValueError) as exc:
            raise ConfigError(name, f"{exc} (from {source})") from exc
    return out


def _coerce_hosts(value: Any) -> tuple[tuple[str, float | None, int | None], ...]:
    """Per-host overrides from a TOML table, its JSON text, or the tuple form itself.

    Raises:
        TypeError: Not a table of host -> {delay_s, concurrency}, or a value out of range.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise TypeError(
                f"expected a JSON object of host -> {{delay_s, concurrency}}: {exc}"
            ) from exc
    if isinstance(value, list | tuple):  # the stored form: [[host, delay_s, concurrency], ...]
        try:
            value = {h: {"delay_s": d, "concurrency": c} for h, d, c in value}
        except (TypeError, ValueError) as exc:
            raise TypeError(f"expected [host, delay_s, concurrency] triples: {exc}") from exc
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a table of host -> {{delay_s, concurrency}}, got {value!r:.80}")
    out = []
    for host, table in value.items():
        if not isinstance(host, str) or not host.strip() or not isinstance(table, Mapping):
            raise TypeError(f"hosts.{host}: expected a table with delay_s and/or concurrency")
        unknown = set(table) - {"delay_s", "concurrency"}
        if unknown:
            raise TypeError(f"hosts.{host}: unknown key {sorted(unknown)[0]!r}")
        delay = table.get("delay_s")
        conc = table.get("concurrency")
        if delay is not None:
            delay = _coerce(float, delay)
            if not math.isfinite(delay) or delay < 0:
                raise TypeError(f"hosts.{host}.delay_s must be a number >= 0, got {delay}")
        if conc is not None:
            conc = _coerce(int, conc)
            if conc < 1:
                raise TypeError(f"hosts.{host}.concurrency must be at least 1, got {conc}")
        out.append((host.strip().lower(), delay, conc))
    return tuple(sorted(out))


def _coerce(hint: Any, value: Any, name: str = "") -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("", "none")):
            return None
        return _coerce(args[0], value, name)
    if origin is tuple:
        if isinstance(value, str):
            return tuple(v for v in (p.strip() for p in value.split(",")) if v)
        if isinstance(value, list | tuple):
            return tuple(str(v) for v in value)
        raise TypeError(f"expected a list, got {value!r}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
            return False
        raise TypeError(f"expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise TypeError(f"expected an integer, got {value!r}")
        if isinstance(value, str):
            text = value.strip()
            if text.lstrip("-").isdigit():
                return int(text)
            if name.endswith("_bytes"):
                return parse_bytes(text)
            raise TypeError(f"expected an integer, got {value!r}")
        if isinstance(value, float) and not value.is_integer():
            raise TypeError(f"expected an integer, got {value!r}")
        return int(value)
    if hint is float:
        if isinstance(value, bool):
            raise TypeError(f"expected a number, got {value!r}")
        return float(value)
    if hint is str:
        return str(value)
    raise TypeError(f"unsupported setting type {hint!r}")  # pragma: no cover
