"""A crawl job's settings, stored with its frontier so that every worker crawls alike.

The first producer or worker of a job on a shared frontier stores the job-level settings
(`JOB_FIELDS`: politeness, retries, scope, fetch limits, spider, store); a worker joining
later adopts them and needs only ``--frontier`` and ``--job``. A value given explicitly (on
the command line, in the environment or a settings file) that differs from the job's is an
error naming the setting, never a silent override. Per-process settings (``concurrency``,
``lease_batch``, ``max_pages``) stay the worker's own.

Code and local paths stay with the processes too (docs/architecture.md invariant 7): whoever can
write the job's Redis keys may change its politeness, scope and limits, but not the spider a
worker imports, the directory it writes WARC files to or the SQLite file it writes results
to (`LOCAL_FIELDS`). A process gets those from its own configuration (``--spider``,
``--warc``, ``--store`` or their ``CRAWLQ_*`` variables, or its own default store), naming the
same file as the job's, or takes the job's only when its operator says so with
``--trust-job-code``. Middlewares (``downloader_middlewares``, ``spider_middlewares``) are
not job settings at all: each process loads its own (`crawlq.middleware`). A job stores
these paths absolute, and two paths are the same when they
name the same file from this process (`_same`: relative to its working directory, ``~`` and
symlinks resolved), so ``--store crawlq.db`` in the seeder's directory is the job's
``/abs/crawlq.db``.

Secrets stay with the processes: the job stores its ``store`` URL without its password
(`crawlq.secrecy.without_password`; anyone who can read the job's Redis keys could read it
there). A worker supplies the password itself, with ``--store`` or ``CRAWLQ_STORE`` (a URL
equal to the job's once its password is removed is the job's store, not a conflict), or
through the driver's own means (``PGPASSWORD``, ``~/.pgpass``).

Seed hosts (exempt from the private-address guard) are computed by each producer and fixed
by the first, and a job's default name is given: `crawlq.engine.plan`.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from crawlq.engine.plan import absolute_local, local_path, same_local_file
from crawlq.errors import ConfigError
from crawlq.frontier.job import JobRecord
from crawlq.secrecy import without_password
from crawlq.settings import Settings, coerce_settings

__all__ = ["JOB_FIELDS", "LOCAL_FIELDS", "bind_job"]

JOB_FIELDS = (
    "delay_s",
    "host_concurrency",
    "timeout_s",
    "connect_timeout_s",
    "max_retries",
    "retry_delay_s",
    "retry_max_delay_s",
    "user_agent",
    "default_headers",
    "referer_policy",
    "cookies_enabled",
    "obey_robots",
    "robots_ttl_s",
    "follow_sitemaps",
    "allow_private",
    "seed_hosts",
    "allowed_domains",
    "include",
    "exclude",
    "max_depth",
    "max_queued",
    "max_queued_per_host",
    "when_full",
    "strip_url_params",
    "max_path_repeats",
    "max_query_params",
    "max_pages_per_host",
    "max_body_bytes",
    "max_redirects",
    "meta_refresh",
    "meta_refresh_max_delay_s",
    "skip_extensions",
    "max_html_depth",
    "max_links_per_page",
    "parse_timeout_s",
    "max_crawl_delay_s",
    "max_retry_after_s",
    "host_backoff_s",
    "host_backoff_max_s",
    "breaker_failures",
    "breaker_cooldown_s",
    "breaker_parks",
    "hosts",
    "autothrottle",
    "max_delay_s",
    "autothrottle_target_concurrency",
    "visibility_timeout_s",
    "heartbeat_s",
    "stale_after_beats",
    "store_body",
    "warc_dir",
    "warc_max_size_bytes",
    "spider",
    "store",
    "inbox_methods",
    "inbox_bypass_scope",
    "inbox_max_entry_bytes",
    "item_dedup_key",
)
"""Settings that belong to the job, not to one worker. Never ``item_pipelines`` or
``item_type``: code comes from each process's own configuration (module docstring)."""


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, tuple) else value


async def bind_job(
    frontier: JobRecord, settings: Settings, *, create: bool = True, runs_spider: bool = True
) -> Settings:
    """Store the job's settings if it has none; return ``settings`` with the job's values.

    Code and local paths are not taken from the job (`LOCAL_FIELDS`, module docstring):
    unless ``settings.trust_job_code``, a job whose spider, WARC directory or SQLite store
    path differs from this process's, which did not give it, is an error naming the job's
    value and the two ways out.

    Args:
        frontier: The job's frontier (its settings record is all this reads and writes).
        settings: This process's settings; ``settings.explicit`` names the ones the user gave.
        create: Store ``settings`` as the job's if it has none (producers); without it a job
            with no settings is an error.
        runs_spider: This process loads the job's spider (workers); producers that only
            queue URLs (``seed``, a crawl's parent) do not, so its spider is no concern of
            theirs.

    Returns:
        ``settings`` with every job-level field taken from the job.

    Raises:
        ConfigError: The job has no settings and ``create`` is false, or an explicitly given
            job-level setting differs from the job's; the
            message names the setting, the job's value and the given one.
    """
    proposed = _proposed(settings)
    stored = await frontier.job_settings(proposed if create else None)
    if stored is None:
        raise ConfigError(
            "job",
            f"job {settings.job!r} has not been seeded: start it with `crawlq seed` or "
            "`crawlq crawl --frontier …` first",
        )
    _refuse_conflicts(stored, proposed, settings)
    if not settings.trust_job_code:
        _refuse_job_code(stored, proposed, settings, runs_spider=runs_spider)
    source = f"job {settings.job!r}'s settings in its frontier"
    adopted = coerce_settings({n: stored[n] for n in JOB_FIELDS if n in stored}, source)
    for name in LOCAL_FIELDS:  # this process's own file, or the job's only when trusted
        if name in settings.explicit or (name in stored and _same(name, stored, proposed)):
            adopted.pop(name, None)  # the same store keeps the password this process gave
    try:
        return dataclasses.replace(settings, **adopted)
    except ConfigError as exc:  # shared state is untrusted: say where the bad value came from
        detail = str(exc).removeprefix(exc.name + ": ")
        raise ConfigError(exc.name, f"{detail} ({source})") from None


def _proposed(settings: Settings) -> dict[str, Any]:
    """The job-level settings of this process, as a job stores them.

    Local paths are absolute (`crawlq.engine.plan.absolute_local`): the job's other
    processes may run in other directories. The store URL has no password.
    """
    proposed = {name: _jsonable(getattr(settings, name)) for name in JOB_FIELDS}
    for name in LOCAL_FIELDS:
        if proposed[name] is not None:
            proposed[name] = absolute_local(name, proposed[name])
    proposed["store"] = without_password(proposed["store"])  # never kept in shared state
    return proposed


def _refuse_conflicts(stored: dict[str, Any], proposed: dict[str, Any], settings: Settings) -> None:
    """Raise if a setting this process gave explicitly differs from the job's.

    Raises:
        ConfigError: Named after the first setting that differs. The job's spider is
            refused alone (`_spider_refusal`), and so is a local path the job names
            (`_local_value`), with the flag that gives the job's value (the advice of
            `_refuse_job_code`); other settings are listed together.
    """
    differ = [
        name
        for name in JOB_FIELDS
        if name in settings.explicit and name in stored and not _same(name, stored, proposed)
    ]
    for name in differ:
        if name == "spider":
            raise ConfigError(name, _spider_refusal(settings, stored[name], proposed[name]))
        if _local_value(name, stored[name]):
            raise ConfigError(
                name,
                f"job {settings.job!r} uses {_WHAT[name]} {stored[name]!r}, and this process "
                f"was given {proposed[name]!r}, another {_KIND[name]}: "
                f"{_advice(name, stored[name])} to use the job's, or use another --job",
            )
    if differ:
        raise ConfigError(
            differ[0],
            "the job was started with "
            + ", ".join(f"{n}={stored[n]!r} (given {proposed[n]!r})" for n in differ)
            + "; leave these out to use the job's values, or use another --job",
        )


LOCAL_FIELDS = ("spider", "warc_dir", "store")
"""Job settings that choose code or local files: never adopted silently (`bind_job`)."""

_FLAGS = {"spider": "--spider", "warc_dir": "--warc", "store": "--store"}


_WHAT = {"spider": "spider", "warc_dir": "WARC directory", "store": "store"}
_KIND = {"spider": "spider", "warc_dir": "directory", "store": "file"}


def _local_value(name: str, value: Any) -> bool:
    """Whether the job's ``value`` of ``name`` names a file or directory on a machine."""
    return name in LOCAL_FIELDS and isinstance(value, str) and local_path(name, value) is not None


def _advice(name: str, value: str) -> str:
    """The one thing to do to use the job's local ``value`` of ``name``: name it."""
    return f"give {_FLAGS[name]} {shlex.quote(value)} (or CRAWLQ_{name.upper()})"


def _refuse_job_code(
    stored: dict[str, Any], proposed: dict[str, Any], settings: Settings, *, runs_spider: bool
) -> None:
    """Raise if this process would take code or a local path from the job's settings.

    A process that gave none of its own still uses the job's file when its own default is
    that file (`_same`: both resolved here); it never opens a path because the job names it.

    Raises:
        ConfigError: The job names a spider (when ``runs_spider``), a WARC directory or a
            SQLite store path that this process did not give and does not have itself.
    """
    for name in LOCAL_FIELDS:
        value = stored.get(name)
        if value is None or name in settings.explicit or _same(name, stored, proposed):
            continue
        if name == "spider":
            if runs_spider:
                raise ConfigError(name, _spider_refusal(settings, value, proposed[name]))
            continue
        if name == "store" and not _local_value(name, value):
            continue  # a database server, not a file here (its password is the worker's)
        own = proposed[name]
        flag = _FLAGS[name]
        has = f"no {flag}" if own is None else f"no {flag} (its own default, {own!r}, differs)"
        raise ConfigError(
            name,
            f"job {settings.job!r} uses {_WHAT[name]} {value!r}, and this process was given "
            f"{has}: {_advice(name, str(value))} to use the job's on this machine (code and "
            "local paths are never taken from the job's settings in Redis, which anyone who "
            "can write them would choose; --trust-job-code takes them all)",
        )


def _spider_refusal(settings: Settings, job_spider: Any, own: Any) -> str:
    """Why this process does not run ``job_spider``, the spider its job names (``own``: its own).

    The job's settings live in Redis, where anyone who can write them chooses their values
    (docs/architecture.md invariant 7: code comes from a process's own configuration). The
    message names the job's spider (as ``repr``: control characters escaped) but never offers
    it back as a command to run: the way out is this process's own configuration.
    """
    given = "no --spider" if own is None else f"spider {own!r}"
    trust = (
        ""
        if settings.trust_job_code
        else " (--trust-job-code takes code and local paths from the job, for a job whose "
        "keys only trusted people can write)"
    )
    return (
        f"job {settings.job!r} names spider {job_spider!r}, which this process was not "
        f"configured with (it was given {given}): crawlq runs only a spider named by the "
        "process's own configuration (--spider or CRAWLQ_SPIDER), never one named by the "
        "job's settings in Redis, which anyone who can write them would choose. To run the "
        f"job's spider, this process's own configuration must name it{trust}; or use "
        "another --job"
    )


def _same(name: str, stored: dict[str, Any], proposed: dict[str, Any]) -> bool:
    """Whether the job's value of ``name`` and this process's agree.

    Local paths (spider file, WARC directory, SQLite store) agree when they name the same
    file, both resolved against this process (`crawlq.engine.plan.same_local_file`:
    working directory, ``~``, symlinks). A store's password, or the lack of one, does not
    count: jobs store none (and jobs seeded by an older crawlq may hold one).
    """
    mine = proposed[name]
    if _local_value(name, stored[name]) and same_local_file(name, stored[name], mine):
        return True
    if name == "store" and isinstance(stored[name], str):
        return without_password(stored[name]) == without_password(proposed[name])
    return bool(stored[name] == proposed[name])
