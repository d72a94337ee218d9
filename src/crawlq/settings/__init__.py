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

The package: `crawlq.settings.model` (the `Settings` fields), `crawlq.settings.checks` (the
checks every value passes), `crawlq.settings.sources` (file, spider, environment, command
line; did-you-mean suggestions), `crawlq.settings.values` (reading values from text),
`crawlq.settings.defaults`, `crawlq.settings.job_name`, `crawlq.settings.store_url` and
`crawlq.settings.handoff` (what a command hands the workers it starts).
"""

from __future__ import annotations

from crawlq.settings.defaults import DEFAULT_SKIP_EXTENSIONS, DEFAULT_USER_AGENT
from crawlq.settings.job_name import JOB_NAME_RULE, check_job_name
from crawlq.settings.model import Settings
from crawlq.settings.sources import coerce_settings, suggest
from crawlq.settings.store_url import check_store
from crawlq.settings.values import host_auth_tables, parse_bytes

__all__ = [
    "DEFAULT_SKIP_EXTENSIONS",
    "DEFAULT_USER_AGENT",
    "JOB_NAME_RULE",
    "Settings",
    "check_job_name",
    "check_store",
    "coerce_settings",
    "host_auth_tables",
    "parse_bytes",
    "suggest",
]
