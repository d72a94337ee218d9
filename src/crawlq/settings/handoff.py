"""What a command hands the worker processes it starts: its own per-process configuration.

Code (the spider, middlewares, item pipelines, the item type), the typed items table, the
proxies (their URLs may hold credentials) and the names of the variables holding host
credentials are never a shared job's settings
(`crawlq.engine.job`): a worker takes them from its own configuration only. The children
that ``crawl --processes`` and ``crawl --engine celery`` start are this command's own
workers, so they get this command's values, through their environment (never argv: a
command line is visible to every user of the machine). Each value is read back by
`crawlq.settings.sources.read_sources` as ``CRAWLQ_<FIELD>`` (tuples comma-separated).
"""

from __future__ import annotations

from crawlq.settings.coercion import host_auth_tables
from crawlq.settings.crawl_settings import Settings

__all__ = ["own_env"]

_TUPLES = ("downloader_middlewares", "spider_middlewares", "item_pipelines", "proxies")
"""Tuple settings naming code or holding credentials (proxy URLs), handed comma-separated."""

_PER_PROCESS = ("item_type", "items_table", "warc_spool_dir")
"""Optional text settings that are never a job's."""

_PROXY_CHOICES = ("proxy_rotation", "proxy_bench_s")
"""How this process uses its proxies: handed when not the default."""


def own_env(settings: Settings) -> dict[str, str]:
    """``CRAWLQ_*`` variables giving a child worker this process's own configuration.

    Returns:
        Variable name to value: the spider when this command was given one, the
        ``trust_job_code`` flag, the code, proxy and per-process settings above, the host
        credential tables (variable names, never a secret) and ``warc_keep_auth``.
    """
    env: dict[str, str] = {}
    if settings.spider is not None and "spider" in settings.explicit:
        env["CRAWLQ_SPIDER"] = settings.spider
    if settings.trust_job_code:
        env["CRAWLQ_TRUST_JOB_CODE"] = "1"
    for name in _TUPLES:
        if getattr(settings, name):
            env[f"CRAWLQ_{name.upper()}"] = ",".join(getattr(settings, name))
    for name in _PER_PROCESS:
        if getattr(settings, name) is not None:
            env[f"CRAWLQ_{name.upper()}"] = getattr(settings, name)
    for name in _PROXY_CHOICES:
        if name in settings.explicit:
            env[f"CRAWLQ_{name.upper()}"] = str(getattr(settings, name))
    if settings.proxy_trust_env:
        env["CRAWLQ_PROXY_TRUST_ENV"] = "1"
    if settings.host_auth:
        env["CRAWLQ_HOSTS"] = host_auth_tables(settings.host_auth)
    if settings.warc_keep_auth:
        env["CRAWLQ_WARC_KEEP_AUTH"] = "1"
    return env
