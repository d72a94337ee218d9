"""Crawl settings: one frozen, typed object with a documented precedence.

Precedence, lowest first (later sources override earlier ones):

1. the defaults;
2. a TOML file (``--config FILE``; keys are the field names);
3. the spider's ``custom_settings`` dict;
4. environment variables ``CRAWLQ_<FIELD NAME IN UPPER CASE>`` (``CRAWLQ_DELAY_S=0.5``);
5. command-line options.

Unknown keys are an error (`ConfigError` naming the key and suggesting the closest names,
as `suggest` does), never silently dropped. Every number carries its unit in its name
(``_s`` seconds, ``_bytes`` bytes). ``crawlq settings`` lists them all.

The package, each module importing only those before it:

* `crawlq.settings.coercion`: reading a value from text or TOML (byte sizes, booleans,
  lists, per-host tables); knows no setting.
* `crawlq.settings.checks`: what every value must be (ranges, formats, cross-field rules),
  the job name rule and which ``store`` values name a store.
* `crawlq.settings.sources`: the sources values are merged from (file, spider, environment,
  command line), typed for a schema of names and type hints; did-you-mean suggestions.
* `crawlq.settings.crawl_settings`: the `Settings` fields with their defaults.
* `crawlq.settings.handoff`: what a command hands the workers it starts.
"""

from __future__ import annotations

from crawlq.settings.checks import JOB_NAME_RULE, check_job_name, check_store
from crawlq.settings.coercion import host_auth_tables, parse_bytes
from crawlq.settings.crawl_settings import (
    DEFAULT_SKIP_EXTENSIONS,
    DEFAULT_USER_AGENT,
    Settings,
    coerce_settings,
    suggest,
)

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
