"""Options shared by several commands, as decorators, and their mapping onto `Settings`."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from crawlq.errors import ConfigError
from crawlq.settings import Settings
from crawlq.spider import Spider

__all__ = [
    "build_settings",
    "frontier_options",
    "guard_options",
    "job_options",
    "output_options",
    "process_options",
    "setting_of_option",
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
            click.option("--user-agent", default=None, help="User-Agent header [crawlq/0.1]."),
            click.option("--ignore-robots", is_flag=True, default=False, help="Ignore robots.txt."),
            click.option(
                "--allow-domain", multiple=True, help="Follow links to DOMAIN (repeatable)."
            ),
            click.option("--include", multiple=True, help="Only follow URLs matching REGEX."),
            click.option("--exclude", multiple=True, help="Do not follow URLs matching REGEX."),
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
            click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML."),
        ],
    )


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


_RENAMED = {
    "delay": "delay_s",
    "timeout": "timeout_s",
    "retry_delay": "retry_delay_s",
    "max_delay": "max_delay_s",
}
_NOT_SETTINGS = {"ignore_robots", "allow_domain", "config", "processes", "quiet", "verbose"}
_OPTION_SETTINGS = {
    "allow_domain": "allowed_domains",
    "ignore_robots": "obey_robots",
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
    if options.get("ignore_robots"):
        cli["obey_robots"] = False
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
    "obey_robots": "--ignore-robots",
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
    "max_delay", "allow_private", "trust_job_code",
}  # fmt: skip
