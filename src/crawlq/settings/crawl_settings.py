"""`Settings`: every setting as a field, with its default, its unit and what it means.

Each field carries its default, its unit and what it means. A frozen, slotted dataclass;
construction runs `crawlq.settings.checks.check` on its values. Units are in the names
(``_s`` seconds, ``_bytes`` bytes). ``crawlq settings`` lists them all.

`Settings.build` merges the sources (`crawlq.settings.sources.read_sources`), lowest first
(later ones override earlier):

1. the defaults of the fields (`DEFAULT_USER_AGENT`, `DEFAULT_SKIP_EXTENSIONS`: those too
   long, or too derived, to write in the field itself);
2. a TOML file (``--config FILE``; keys are the field names);
3. the spider's ``custom_settings`` dict;
4. environment variables ``CRAWLQ_<FIELD NAME IN UPPER CASE>`` (``CRAWLQ_DELAY_S=0.5``);
5. command-line options.

Stored job settings are read with `coerce_settings`. Every value is converted to its field's
type (`crawlq.settings.coercion`). An unknown name is a `ConfigError` that suggests the
closest names (`suggest`: did you mean ``delay_s``?), never silently dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from crawlq import __version__
from crawlq.settings.checks import check
from crawlq.settings.sources import closest, coerce_all, read_sources

__all__ = [
    "DEFAULT_SKIP_EXTENSIONS",
    "DEFAULT_USER_AGENT",
    "Settings",
    "coerce_settings",
    "suggest",
]


# -- defaults too long, or too derived, to write in the field -------------------------------------


DEFAULT_USER_AGENT = "crawlq/" + ".".join(__version__.split(".")[:2])
"""The default ``user_agent``: ``crawlq/<major>.<minor>`` of `crawlq.__version__`."""

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


# -- the settings ---------------------------------------------------------------------------------


_NOT_NAMED = frozenset({"explicit", "host_auth"})
"""Fields no source sets by name: ``host_auth`` comes from ``hosts`` tables."""


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
    What happens at the bound is ``when_full`` (`crawlq.frontier.queue.QueueBounds`)."""

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

    default_headers: tuple[str, ...] = ()
    """Request headers sent with every request of the job, as ``Name: value`` lines
    (``--header``, repeatable; ``CRAWLQ_DEFAULT_HEADERS``: one header per line; a settings
    file: a list of lines). They override the built-in ``Accept``, ``Accept-Language: en``
    and ``Accept-Encoding``; a request's own ``headers`` override them. Checked by
    `crawlq.web.headers`: a name is an RFC 9110 token, a value holds no CR, LF or NUL, and
    ``Host``, ``Content-Length``, ``Transfer-Encoding``, ``Connection`` (the client's own),
    ``Cookie`` (the jar's; a request's ``cookies``), ``Authorization`` and
    ``Proxy-Authorization`` (credentials are never stored with a job) and ``User-Agent``
    (``user_agent``) are refused."""

    referer_policy: str = "strict-origin-when-cross-origin"
    """Which ``Referer`` a followed link, a redirect hop or a sitemap's URL is sent with: the
    policies of the W3C Referrer Policy spec (https://www.w3.org/TR/referrer-policy/),
    applied to the URL of the page it was found on (credentials and fragment removed).
    The default, the spec's and browsers': the full URL to the same origin, only the origin
    (``https://host/``) to another, nothing from https to http. ``no-referrer``: never sent.
    Seeds have none."""

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
    filtered ``private_address``, except on a seed host (see `crawlq.web.addresses`)."""

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
    ``concurrency``. A host's override applies to its subdomains too. The same table's
    ``auth_*`` keys are credentials (``host_auth``), read only from the settings file and
    ``CRAWLQ_HOSTS``, never part of this setting or of the job's."""

    host_auth: tuple[tuple[str, str | None, str | None, str | None], ...] = ()
    """Per-host credentials by reference, as ``(host, auth_user, auth_password_env,
    auth_token_env)``: the ``auth_*`` keys of a ``[hosts."example.com"]`` table in the
    settings file or ``CRAWLQ_HOSTS`` (README "Authentication"), never set by name. The
    ``_env`` values name environment variables of this process that hold the password or
    bearer token. Per process, never a job setting: the job's ``hosts`` never carry it."""

    visibility_timeout_s: float = 0.0
    """Seconds before an unacked task or lease returns to the queue when nothing says its
    worker is alive; 0: 4 x ``timeout_s``. On the Redis frontier a worker's leases return
    sooner, once its heartbeat is stale (``worker_stale_s``): this only caps that hold. On a
    Celery Redis broker it is the broker's visibility timeout (`crawlq.celery.runtime.config`)."""

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
    relative path is made absolute when the settings are built. Or ``s3://bucket/prefix``:
    an S3-compatible object store (``pip install 'crawlq[s3]'``), each file written in
    ``warc_spool_dir`` and uploaded when it is closed (`crawlq.settings.archive`)."""

    warc_spool_dir: str | None = None
    """With ``warc_dir`` = ``s3://…``: the local directory where WARC files are written and
    kept until their upload is confirmed (None:
    `crawlq.settings.archive.default_spool_dir`, ``~/.cache/crawlq/warc-spool/<bucket>/
    <prefix>``). A worker started again uploads the files a killed one left there. Per
    process, made absolute when the settings are built."""

    warc_keep_auth: bool = False
    """Keep the ``Authorization`` header a request was sent with (README "Authentication")
    in its WARC request record; by default its value is written ``[redacted]``. Per process."""

    proxies: tuple[str, ...] = ()
    """Proxies every request goes through, as ``scheme://[user:password@]host:port`` URLs
    (``http``, ``https``, ``socks5``; ``--proxy URL``, repeatable; a settings file list;
    ``CRAWLQ_PROXIES``: comma-separated). Per process, never a job setting: they may carry
    credentials, which are sent only to the proxy and shown nowhere (`crawlq.rules.proxies`)."""

    proxy_rotation: str = "host"
    """Which proxy a request takes, among those not benched: ``host`` (one host sticks to
    one proxy) or ``request`` (in turn, request by request)."""

    proxy_trust_env: bool = False
    """With no ``proxies``: use ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and
    ``NO_PROXY`` from this process's environment (``--proxy-trust-env``). Per process."""

    proxy_bench_s: float = 30.0
    """Seconds a proxy is benched after `crawlq.rules.proxies.FAILURES_TO_BENCH` failures in a row,
    doubling for each bench in a row (counted in the frontier, for every worker)."""

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

    item_type: str | None = None
    """The declared item class as ``module:Class`` or ``file.py:Class`` (a dataclass, attrs
    class, pydantic model or TypedDict) that dict items are validated against
    (`crawlq.items.validate`) and the typed sinks write (``items_table``, Parquet); None: the
    spider's ``item_type`` attribute. Code: a per-process setting, never a job's."""

    items_table: str | None = None
    """PostgreSQL store: also write every item into this table, one typed column per field of
    the declared item type (created when missing; `crawlq.store.postgres.items_table`). None: items
    are JSONB only. A per-process setting: give it to every worker of a job."""

    downloader_middlewares: tuple[str, ...] = ()
    """Downloader middlewares of this process, ``module:Class`` or ``path/file.py:Class``, in
    order, before the spider's own ``downloader_middlewares`` (``--downloader-middleware``,
    repeatable; ``CRAWLQ_DOWNLOADER_MIDDLEWARES``: comma-separated; `crawlq.middleware`).
    Code: a per-process setting, never a shared job's."""

    spider_middlewares: tuple[str, ...] = ()
    """Spider middlewares of this process (``--spider-middleware``), as
    ``downloader_middlewares``: ``process_spider_output`` of a callback's output."""

    item_pipelines: tuple[str, ...] = ()
    """Item pipelines, run in order after the spider's own ``item_pipelines`` attribute:
    each ``module:Class`` or ``path/file.py:Class`` (``--pipeline``, repeatable;
    ``CRAWLQ_ITEM_PIPELINES``: comma-separated; a settings file: a list). Code: a
    per-process setting, never taken from a shared job (`crawlq.engine.item_flow`)."""

    item_dedup_key: tuple[str, ...] = ()
    """Item fields whose values together are an item's dedup key across the whole job
    (``--item-dedup-key``, repeatable: a composite key): an item whose key another page
    produced first is dropped as ``duplicate_item``. Empty: no item dedup."""

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

    celery_max_refusals: int = 5
    """Celery engine, per worker: a URL whose task workers refused this many times (their
    store, spider or a setting differs from the job's) is dead-lettered ``worker_refused``
    instead of being sent again (see `crawlq.celery.tasks.deliver`)."""

    celery_result_expires_s: float = 3600.0
    """Celery engine: seconds a ``scrape`` task's result (a small dict of its outcome) is kept
    in the result backend, the job's Redis; 0: no result backend, results are not stored."""

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
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name, value in check(values).items():
            object.__setattr__(self, name, value)

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
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in _NOT_NAMED)

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
        merged = read_sources(
            _schema(), file=file, spider_settings=spider_settings, env=env, cli=cli
        )
        return cls(**merged, explicit=frozenset(merged))


_HINTS: dict[str, Any] = {}


def _schema() -> dict[str, Any]:
    """Every setting name (declaration order) -> its type hint: the schema of the sources."""
    if not _HINTS:
        hints = get_type_hints(Settings)
        _HINTS.update((name, hints[name]) for name in Settings.field_names())
    return _HINTS


def suggest(name: str, *, limit: int = 3) -> list[str]:
    """The setting names closest to an unknown ``name``, best first (possibly none).

    As `crawlq.settings.sources.closest` over `Settings.field_names`.
    """
    return closest(name, Settings.field_names(), limit=limit)


def coerce_settings(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Setting values from ``source`` converted to their types (as `Settings.build` does).

    For values read from shared state (a job's stored settings), which may hold anything.

    Raises:
        ConfigError: An unknown name or a value of the wrong type; the message names the
            setting and ``source``.
    """
    return coerce_all(values, source, _schema())
