"""Command options onto `Settings`: which option sets which setting, and back.

`build_settings` turns a command's parsed options into `Settings` (defaults < file < spider
< environment < command line) and names the offending option (``--delay``) or ``CRAWLQ_*``
variable in a `click.UsageError`; `setting_of_option` answers for ``crawlq settings``.
"""

from __future__ import annotations

import os
from typing import Any

import click

from crawlq.errors import ConfigError
from crawlq.settings import Settings
from crawlq.spider import Spider

__all__ = ["build_settings", "option_error", "setting_of_option"]

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
    "header": "default_headers",
    "pipeline": "item_pipelines",
    "broker": "broker_url",
    "downloader_middleware": "downloader_middlewares",
    "spider_middleware": "spider_middlewares",
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
    cli = _cli_of(options)
    try:
        return Settings.build(
            file=options.get("config"),
            spider_settings=spider_cls.custom_settings if spider_cls else None,
            cli=cli,
        )
    except ConfigError as exc:
        raise _usage_error(exc, cli) from None


def option_error(exc: ConfigError, options: dict[str, Any]) -> click.UsageError:
    """``exc``, raised after `build_settings`, as a `click.UsageError` naming the option.

    For an error found once the settings are built (a middleware that cannot be loaded):
    the message names the option the user typed (``--downloader-middleware: …
    (setting downloader_middlewares)``), or the ``CRAWLQ_*`` variable; the setting's name
    when neither gave it (a settings file, the spider class).
    """
    return _usage_error(exc, _cli_of(options))


def _usage_error(exc: ConfigError, cli: dict[str, Any]) -> click.UsageError:
    flag = _flag_of(exc.name, cli)
    detail = str(exc).removeprefix(f"{exc.name}: ")
    if flag is None:
        return click.UsageError(str(exc))
    if detail.startswith(flag):  # the message names its option already
        return click.UsageError(f"{detail} (setting {exc.name})")
    return click.UsageError(f"{flag}: {detail} (setting {exc.name})")


def _cli_of(options: dict[str, Any]) -> dict[str, Any]:
    """The command line's settings in ``options`` (a command's parsed options)."""
    cli = {
        _RENAMED.get(k, k): v
        for k, v in options.items()
        if k not in _NOT_SETTINGS and k in _OPTION_NAMES
    }
    cli["allowed_domains"] = options.get("allow_domain") or None
    cli["include"] = options.get("include") or None
    cli["exclude"] = options.get("exclude") or None
    cli["strip_url_params"] = options.get("strip_url_param") or None
    cli["default_headers"] = options.get("header") or None
    cli["downloader_middlewares"] = options.get("downloader_middleware") or None
    cli["spider_middlewares"] = options.get("spider_middleware") or None
    cli["item_pipelines"] = options.get("pipeline") or None
    cli["item_dedup_key"] = options.get("item_dedup_key") or None
    cli["proxies"] = options.get("proxies") or None
    if options.get("ignore_robots"):
        cli["obey_robots"] = False
    if options.get("no_cookies"):
        cli["cookies_enabled"] = False
    if options.get("no_meta_refresh"):
        cli["meta_refresh"] = False
    return cli


_FLAGS = {
    "allowed_domains": "--allow-domain",
    "bloom_capacity": "--bloom",
    "max_push_wait_s": "--max-push-wait",
    "obey_robots": "--ignore-robots",
    "cookies_enabled": "--no-cookies",
    "meta_refresh": "--no-meta-refresh",
    "strip_url_params": "--strip-url-param",
    "default_headers": "--header",
    "downloader_middlewares": "--downloader-middleware",
    "spider_middlewares": "--spider-middleware",
    "item_pipelines": "--pipeline",
    "proxies": "--proxy",
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
    "max_pages_per_host", "referer_policy", "warc_keep_auth", "item_type", "items_table",
    "item_dedup_key", "proxy_rotation", "proxy_trust_env",
}  # fmt: skip
