"""The options several commands share, as click decorators, and how ``--since`` reads.

The decorators: a job's settings (`job_options`), ``--sitemap`` (`sitemap_option`, its values
checked by `sitemap_urls`), ``--allow-private``, ``--wide``, ``--frontier``/``--job``, a
process's own settings, ``-q``/``-v``, logs and metrics, and ``--since`` (`since_option`, on
``crawlq export``, ``dead list`` and ``dead replay``). Their mapping onto `Settings` (which
option sets which setting, and which flag an invalid setting came from) is
`crawlq.cli.option_settings` (`build_settings`).

``--since`` takes an ISO 8601 time (UTC unless it says otherwise) or an age (``90s``, ``30m``,
``2h``, ``7d``): `parse_since` turns either into Unix seconds, and `since_s` reads the
option's value, or raises the ``click.BadParameter`` that names ``--since``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from crawlq.errors import ConfigError, InvalidURL
from crawlq.secrecy import redact
from crawlq.settings import DEFAULT_USER_AGENT, check_job_name
from crawlq.settings.checks import is_redis_url
from crawlq.sitemap import sitemap_request
from crawlq.web.headers import REFERRER_POLICIES

__all__ = [
    "SINCE_FORMS",
    "checked_job",
    "frontier_options",
    "guard_options",
    "job_options",
    "observe_options",
    "output_options",
    "parse_since",
    "process_options",
    "shared_frontier",
    "since_option",
    "since_s",
    "sitemap_option",
    "sitemap_urls",
    "wide_option",
]

F = TypeVar("F", bound=Callable[..., Any])


def checked_job(job: str) -> str:
    """``--job`` as `crawlq.settings.check_job_name` takes it, else a ``click.BadParameter``."""
    try:
        return check_job_name(job)
    except ConfigError as exc:
        raise click.BadParameter(str(exc).removeprefix("job: "), param_hint="--job") from None


def shared_frontier(frontier: str) -> str:
    """``--frontier`` of a command that reads a shared job: a Redis URL, else a BadParameter.

    The message shows the URL without its password (`crawlq.secrecy.redact`). Such a command
    never takes a SQLite file, so a typo never opens (and so creates) one.
    """
    if not is_redis_url(frontier):
        raise click.BadParameter(
            f"{redact(frontier)!r}: expected redis://[:password@]host:port/DB",
            param_hint="--frontier",
        )
    return frontier


def _apply(f: F, decorators: list[Callable[[F], F]]) -> F:
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def job_options(f: F) -> F:
    """Settings that belong to a crawl job (stored with a shared job; see crawlq.engine.job)."""
    return _apply(
        f,
        [
            click.option(
                "--store",
                default=None,
                help="Results: a SQLite file [crawlq.db] or postgresql://user@host:port/db.",
            ),
            click.option(
                "--max-depth", type=int, default=None, help="Follow links at most N deep."
            ),
            click.option(
                "--host-concurrency",
                type=int,
                default=None,
                help="Requests in flight per host [1].",
            ),
            click.option(
                "--delay",
                type=float,
                default=None,
                help="Seconds between requests to a host [1.0].",
            ),
            click.option("--timeout", type=float, default=None, help="Seconds per fetch [30]."),
            click.option(
                "--max-retries", type=int, default=None, help="Retries of transient failures [3]."
            ),
            click.option("--retry-delay", type=float, default=None, help="Backoff base, s [1.0]."),
            click.option(
                "--user-agent", default=None, help=f"User-Agent header [{DEFAULT_USER_AGENT}]."
            ),
            click.option(
                "--header",
                multiple=True,
                metavar="'NAME: VALUE'",
                help="Send this request header with every request of the job (repeatable; "
                "replaces default_headers; no Host, Cookie, Authorization...).",
            ),
            click.option(
                "--pipeline",
                multiple=True,
                metavar="SPEC",
                help="Item pipeline module:Class or file.py:Class, run in order after the "
                "spider's item_pipelines (repeatable; this process's own, never a job's).",
            ),
            click.option(
                "--item-dedup-key",
                multiple=True,
                metavar="FIELD",
                help="Drop an item whose value of FIELD another page of the job produced "
                "first (repeatable: a composite key).",
            ),
            click.option(
                "--proxy",
                "proxies",
                multiple=True,
                metavar="URL",
                help="Send every request through this proxy: http://, https:// or socks5:// "
                "(repeatable: rotated; credentials are better kept in CRAWLQ_PROXIES or the "
                "settings file than on a command line).",
            ),
            click.option(
                "--proxy-rotation",
                type=click.Choice(["host", "request"]),
                default=None,
                help="One proxy per host, or in turn per request [host].",
            ),
            click.option(
                "--proxy-trust-env",
                is_flag=True,
                default=None,
                help="With no --proxy, use HTTP_PROXY / HTTPS_PROXY / NO_PROXY.",
            ),
            click.option(
                "--referer-policy",
                type=click.Choice(REFERRER_POLICIES),
                default=None,
                help="Referer sent with followed links (W3C Referrer Policy) "
                "[strict-origin-when-cross-origin].",
            ),
            click.option(
                "--ignore-robots",
                is_flag=True,
                default=False,
                help="Ignore robots.txt, and follow rel=nofollow links and meta robots nofollow.",
            ),
            click.option(
                "--no-meta-refresh",
                is_flag=True,
                default=False,
                help='Do not follow <meta http-equiv="refresh"> as a redirect.',
            ),
            click.option(
                "--skip-extensions",
                default=None,
                metavar="LIST",
                help="Comma-separated path extensions of links not followed (pdf,zip); "
                "'' for none [images, media, archives, documents...].",
            ),
            click.option(
                "--no-cookies",
                is_flag=True,
                default=False,
                help="Keep no cookies and send none (default: a jar per worker process and job).",
            ),
            click.option(
                "--follow-sitemaps",
                is_flag=True,
                default=None,
                help="Read the sitemaps named in each host's robots.txt (Sitemap: lines).",
            ),
            click.option(
                "--allow-domain", multiple=True, help="Follow links to DOMAIN (repeatable)."
            ),
            click.option("--include", multiple=True, help="Only follow URLs matching REGEX."),
            click.option("--exclude", multiple=True, help="Do not follow URLs matching REGEX."),
            click.option(
                "--strip-url-param",
                multiple=True,
                help="Remove this query or ;path parameter (a name or glob such as utm_*) from "
                "every URL (repeatable; replaces the default list jsessionid, phpsessid, sid, "
                "sessionid, utm_*; '' removes nothing).",
            ),
            click.option(
                "--max-query-params",
                type=int,
                default=None,
                help="Do not follow URLs with more query parameters than N [20].",
            ),
            click.option(
                "--max-path-repeats",
                type=int,
                default=None,
                help="Do not follow URLs whose path repeats a sequence of segments more than "
                "N times in a row [2].",
            ),
            click.option(
                "--max-pages-per-host",
                type=int,
                default=None,
                help="Admit at most N URLs of one host into the crawl [no limit].",
            ),
            click.option("--spider", default=None, help="Spider: module:Class or file.py:Class."),
            click.option(
                "--item-type",
                default=None,
                metavar="SPEC",
                help="The declared item class (module:Class or file.py:Class: dataclass, attrs, "
                "pydantic, TypedDict): dict items are validated against it, typed sinks "
                "write its fields [the spider's item_type].",
            ),
            click.option(
                "--items-table",
                default=None,
                metavar="NAME",
                help="PostgreSQL store: also write items into table NAME, one typed column "
                "per field of the item type.",
            ),
            click.option(
                "--trust-job-code",
                is_flag=True,
                default=None,
                help="Shared job: take its spider, WARC directory and SQLite store path from "
                "its settings in Redis when not given here.",
            ),
            click.option(
                "--bloom",
                "bloom_capacity",
                type=int,
                default=None,
                metavar="N",
                help="Shared job: Bloom-filter dedup sized for N URLs (0.1% false positives).",
            ),
            click.option(
                "--store-body",
                is_flag=True,
                default=None,
                help="Keep each page's body in the store (export it with --body).",
            ),
            click.option(
                "--warc",
                "warc_dir",
                default=None,
                metavar="DIR|s3://BUCKET/PREFIX",
                help="Archive every fetched page's request and response to WARC files in DIR, "
                "or upload each file to an S3-compatible store as it closes.",
            ),
            click.option(
                "--warc-max-size",
                "warc_max_size_bytes",
                default=None,
                metavar="SIZE",
                help="Start a new WARC file at this size (1GB, 500MiB, bytes) [1GB].",
            ),
            click.option(
                "--autothrottle",
                is_flag=True,
                default=None,
                help="Adapt each host's delay to its latency, between --delay and --max-delay.",
            ),
            click.option(
                "--max-delay",
                type=float,
                default=None,
                help="Largest per-host delay --autothrottle sets, s [60].",
            ),
            click.option(
                "--max-queued",
                type=click.IntRange(min=1),
                default=None,
                metavar="N",
                help="Bound the job's queue at N requests (see --when-full).",
            ),
            click.option(
                "--max-queued-per-host",
                type=click.IntRange(min=1),
                default=None,
                metavar="N",
                help="Bound each host's queue at N requests.",
            ),
            click.option(
                "--when-full",
                type=click.Choice(["block", "drop-lowest"]),
                default=None,
                help="At a bound: producers wait [block], or drop the lowest priority.",
            ),
            click.option(
                "--max-push-wait",
                "max_push_wait_s",
                type=click.FloatRange(min=0),
                default=None,
                metavar="S",
                help="A producer waits at most S seconds for room in a full frontier.",
            ),
            click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML."),
        ],
    )


def sitemap_option(f: F) -> F:
    """``--sitemap URL`` (repeatable): sitemaps to read, on ``crawl`` and ``seed``."""
    return click.option(
        "--sitemap",
        multiple=True,
        metavar="URL",
        help="Read URL as a sitemap (XML, index, text, gzipped) and crawl what it lists "
        "(repeatable).",
    )(f)


def sitemap_urls(values: tuple[str, ...] | None) -> tuple[str, ...]:
    """The ``--sitemap`` values, each checked as a sitemap request.

    Raises:
        click.BadParameter: A value is not an http(s) URL; the message names it.
    """
    urls = tuple(values or ())
    for url in urls:
        try:
            sitemap_request(url)
        except InvalidURL as exc:
            raise click.BadParameter(str(exc), param_hint="--sitemap") from None
    return urls


def guard_options(f: F) -> F:
    """``--allow-private``: a job setting given by the producers (``crawl``, ``seed``)."""
    return click.option(
        "--allow-private",
        is_flag=True,
        default=None,
        help="Allow requests to loopback, private and link-local addresses on any host "
        "(default: only on the seeds' hosts; CRAWLQ_ALLOW_PRIVATE).",
    )(f)


def wide_option(f: F) -> F:
    """``--wide``: a table command's cells whole on one line, not fitted to the terminal."""
    return click.option(
        "--wide",
        is_flag=True,
        help="Print the table at full width (default: fit the terminal, or 200 columns off "
        "one, wrapping or cutting long cells; --json for scripts).",
    )(f)


def frontier_options(*, required: bool) -> Callable[[F], F]:
    """``--frontier`` and ``--job``."""

    def decorate(f: F) -> F:
        return _apply(
            f,
            [
                click.option(
                    "--frontier",
                    required=required,
                    default=None,
                    help="Shared frontier: redis://[:password@]host:port/db, rediss://…, "
                    "unix://… or a SQLite file (*.db)"
                    + ("." if required else " (default: embedded in --store)."),
                ),
                click.option("--job", required=required, default=None, help="Job name."),
            ],
        )

    return decorate


def process_options(f: F) -> F:
    """Per-process options: concurrency, page budget, processes."""
    return _apply(
        f,
        [
            click.option("--concurrency", type=int, default=None, help="Requests in flight [16]."),
            click.option("--max-pages", type=int, default=None, help="Stop after N stored pages."),
            click.option(
                "--downloader-middleware",
                multiple=True,
                metavar="SPEC",
                help="A downloader middleware of this process, module:Class or "
                "file.py:Class (repeatable; see README Middlewares).",
            ),
            click.option(
                "--spider-middleware",
                multiple=True,
                metavar="SPEC",
                help="A spider middleware of this process, module:Class or file.py:Class "
                "(repeatable).",
            ),
            click.option(
                "--processes",
                type=int,
                default=None,
                help="Processes that work the crawl on this machine [default: 1 without "
                "--frontier, the CPU cores with it].",
            ),
            click.option(
                "--warc-keep-auth",
                is_flag=True,
                default=None,
                help="Keep the Authorization header in WARC request records [redacted].",
            ),
        ],
    )


def output_options(f: F) -> F:
    """``-q`` and ``-v``."""
    return _apply(
        f,
        [
            click.option("-q", "--quiet", is_flag=True, help="No progress display, errors only."),
            click.option("-v", "--verbose", count=True, help="-v: a line per URL; -vv: debug."),
        ],
    )


def observe_options(f: F) -> F:
    """Logs and metrics of a process that works: progress lines, log format, Prometheus."""
    return _apply(
        f,
        [
            click.option(
                "--log-interval",
                type=float,
                default=None,
                metavar="SECONDS",
                help="Off a terminal: a progress line every SECONDS [30].",
            ),
            click.option(
                "--log-format",
                type=click.Choice(["text", "json"]),
                default=None,
                help="Log lines as text [default] or one JSON object per line.",
            ),
            click.option(
                "--metrics-port",
                type=click.IntRange(0, 65535),
                default=None,
                metavar="PORT",
                help="Serve Prometheus metrics on PORT (/metrics).",
            ),
            click.option(
                "--metrics-host",
                default=None,
                help="Address the metrics endpoint binds [127.0.0.1].",
            ),
        ],
    )


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

SINCE_FORMS = "an ISO 8601 time (UTC unless it says otherwise) or an age (30m, 2h, 7d)"
"""What ``--since`` accepts, as its help text and error message say it."""


def parse_since(value: str, now_s: float) -> float:
    """``--since`` as Unix seconds.

    An ISO 8601 time (``2026-12-01``, ``2026-12-01T10:00:00Z``; UTC unless it says
    otherwise) or an age before ``now_s`` (``90s``, ``30m``, ``2h``, ``7d``; decimals
    allowed: ``1.5h``).

    Raises:
        ValueError: Neither form; the message names the value.
    """
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text)
    if match:
        return now_s - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{value!r}: not a time (2026-12-01T10:00:00Z) nor an age (30m, 2h, 7d)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def since_s(since: str | None) -> float | None:
    """The ``--since`` value as Unix seconds (None: no lower bound), an age counted from now.

    Raises:
        click.BadParameter: Neither a time nor an age; the message names ``--since``.
    """
    if since is None:
        return None
    try:
        return parse_since(since, time.time())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from None


def since_option(what: str) -> Callable[[F], F]:
    """The ``--since`` option; ``what`` says what it selects (``records``, ``dead-lettered``)."""
    return click.option(
        "--since",
        default=None,
        metavar="TIME|AGE",
        help=f"Only {what} since this time: {SINCE_FORMS}.",
    )
