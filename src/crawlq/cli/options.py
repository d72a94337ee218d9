"""Options shared by several commands, as decorators, and their mapping onto `Settings`."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from crawlq.errors import ConfigError, InvalidURL
from crawlq.settings import DEFAULT_USER_AGENT, Settings
from crawlq.sitemap import sitemap_request
from crawlq.spider import Spider

__all__ = [
    "build_settings",
    "frontier_options",
    "guard_options",
    "job_options",
    "observe_options",
    "output_options",
    "process_options",
    "setting_of_option",
    "sitemap_option",
    "sitemap_urls",
]

F = TypeVar("F", bound=Callable[..., Any])


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
                metavar="DIR",
                help="Archive every fetched page's request and response to WARC files in DIR.",
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
                    help="Shared frontier: redis://[:password@]host:port/db "
                    + ("" if required else "(default: embedded in --store)"),
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
                "--processes",
                type=int,
                default=None,
                help="Worker processes on this machine (shared frontier only).",
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


_RENAMED = {
    "delay": "delay_s",
    "timeout": "timeout_s",
    "retry_delay": "retry_delay_s",
    "max_delay": "max_delay_s",
    "log_interval": "log_interval_s",
}
_NOT_SETTINGS = {
    "ignore_robots",
    "no_meta_refresh",
    "allow_domain",
    "config",
    "processes",
    "quiet",
    "verbose",
}
_OPTION_SETTINGS = {
    "allow_domain": "allowed_domains",
    "ignore_robots": "obey_robots",
    "no_cookies": "cookies_enabled",
    "no_meta_refresh": "meta_refresh",
    "strip_url_param": "strip_url_params",
    "broker": "broker_url",
}
"""Options that set a setting of another name (besides `_RENAMED`): ``--broker`` is the
Celery engine's ``broker_url`` (see ``crawlq crawl``)."""


def setting_of_option(name: str) -> str | None:
    """The setting a command option (by its Python name, ``delay``) sets, or None."""
    setting = _OPTION_SETTINGS.get(name) or _RENAMED.get(name, name)
    return setting if setting in Settings.field_names() else None


def build_settings(options: dict[str, Any], spider_cls: type[Spider] | None = None) -> Settings:
    """Build `Settings` from parsed options (defaults < file < spider < env < command line).

    Raises:
        click.UsageError: A setting is invalid; the message names it.
    """
    cli = {
        _RENAMED.get(k, k): v
        for k, v in options.items()
        if k not in _NOT_SETTINGS and k in _OPTION_NAMES
    }
    cli["allowed_domains"] = options.get("allow_domain") or None
    cli["include"] = options.get("include") or None
    cli["exclude"] = options.get("exclude") or None
    cli["strip_url_params"] = options.get("strip_url_param") or None
    if options.get("ignore_robots"):
        cli["obey_robots"] = False
    if options.get("no_cookies"):
        cli["cookies_enabled"] = False
    if options.get("no_meta_refresh"):
        cli["meta_refresh"] = False
    try:
        return Settings.build(
            file=options.get("config"),
            spider_settings=spider_cls.custom_settings if spider_cls else None,
            cli=cli,
        )
    except ConfigError as exc:
        flag = _flag_of(exc.name, cli)
        if flag is None:
            raise click.UsageError(str(exc)) from None
        detail = str(exc).removeprefix(f"{exc.name}: ")
        raise click.UsageError(f"{flag}: {detail} (setting {exc.name})") from None


_FLAGS = {
    "allowed_domains": "--allow-domain",
    "bloom_capacity": "--bloom",
    "max_push_wait_s": "--max-push-wait",
    "obey_robots": "--ignore-robots",
    "cookies_enabled": "--no-cookies",
    "meta_refresh": "--no-meta-refresh",
    "strip_url_params": "--strip-url-param",
    "warc_dir": "--warc",
    "warc_max_size_bytes": "--warc-max-size",
}
"""Settings whose option is not the setting's name in dashes (after `_RENAMED`)."""


def _flag_of(setting: str, cli: dict[str, Any]) -> str | None:
    """The option or ``CRAWLQ_*`` variable that gave ``setting`` (None: a file or spider)."""
    if cli.get(setting) is None:
        variable = f"CRAWLQ_{setting.upper()}"
        return variable if variable in os.environ else None
    if setting in _FLAGS:
        return _FLAGS[setting]
    option = next((k for k, v in _RENAMED.items() if v == setting), setting)
    return "--" + option.replace("_", "-")


_OPTION_NAMES = {
    "store", "max_depth", "host_concurrency", "delay", "timeout", "max_retries", "retry_delay",
    "user_agent", "include", "exclude", "spider", "frontier", "job", "concurrency", "max_pages",
    "bloom_capacity", "store_body", "warc_dir", "warc_max_size_bytes", "autothrottle",
    "max_delay", "allow_private", "trust_job_code", "log_interval", "log_format",
    "metrics_port", "metrics_host", "max_queued", "max_queued_per_host", "when_full",
    "max_push_wait_s", "follow_sitemaps", "skip_extensions", "max_query_params", "max_path_repeats",
    "max_pages_per_host",
}  # fmt: skip
