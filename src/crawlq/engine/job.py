"""A crawl job's settings, stored with its frontier so that every worker crawls alike.

The first producer or worker of a job on a shared frontier stores the job-level settings
(`JOB_FIELDS`: politeness, retries, scope, fetch limits, spider, store); a worker joining
later adopts them and needs only ``--frontier`` and ``--job``. A value given explicitly (on
the command line, in the environment or a settings file) that differs from the job's is an
error naming the setting, never a silent override. Per-process settings (``concurrency``,
``lease_batch``, ``max_pages``) stay the worker's own.

Secrets stay with the processes: the job stores its ``store`` URL without its password
(`crawlq.secrecy.without_password`; anyone who can read the job's Redis keys could read it
there). A worker supplies the password itself, with ``--store`` or ``CRAWLQ_STORE`` (a URL
equal to the job's once its password is removed is the job's store, not a conflict), or
through the driver's own means (``PGPASSWORD``, ``~/.pgpass``).

Seed hosts (``seed_hosts``, exempt from the private-address guard) are computed by each
producer from its seeds (`with_seed_hosts`) and, like the other job settings, fixed by the
first one: a later ``crawlq seed`` does not add its hosts to a running job (workers already
hold the job's settings). `new_private_seed_hosts` finds the seeds that will therefore be
refused, so that the producer can warn about them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
import socket
from collections.abc import Iterable, Sequence
from typing import Any

from crawlq.addresses import AddressGuard, bare_host, is_ip_literal
from crawlq.errors import ConfigError
from crawlq.frontier import Frontier
from crawlq.request import CrawlRequest
from crawlq.secrecy import without_password
from crawlq.settings import Settings, check_job_name
from crawlq.urls import host_key

__all__ = [
    "JOB_FIELDS",
    "bind_job",
    "default_job_name",
    "new_private_seed_hosts",
    "with_seed_hosts",
]

_LOOKUP_TIMEOUT_S = 5.0
"""Seconds `new_private_seed_hosts` spends at most on DNS lookups, all hosts together."""
_LOOKUP_MAX_HOSTS = 50
"""Most new seed hosts `new_private_seed_hosts` looks up (it only decides a warning)."""

JOB_FIELDS = (
    "delay_s",
    "host_concurrency",
    "timeout_s",
    "connect_timeout_s",
    "max_retries",
    "retry_delay_s",
    "retry_max_delay_s",
    "user_agent",
    "obey_robots",
    "robots_ttl_s",
    "allow_private",
    "seed_hosts",
    "allowed_domains",
    "include",
    "exclude",
    "max_depth",
    "max_body_bytes",
    "max_redirects",
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
)
"""Settings that belong to the job, not to one worker."""


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, tuple) else value


async def bind_job(frontier: Frontier, settings: Settings, *, create: bool = True) -> Settings:
    """Store the job's settings if it has none; return ``settings`` with the job's values.

    Args:
        frontier: The job's frontier.
        settings: This process's settings; ``settings.explicit`` names the ones the user gave.
        create: Store ``settings`` as the job's if it has none (producers); without it a job
            with no settings is an error.

    Returns:
        ``settings`` with every job-level field taken from the job.

    Raises:
        ConfigError: The job has no settings and ``create`` is false, or an explicitly given
            job-level setting differs from the job's; the
            message names the setting, the job's value and the given one.
    """
    proposed = {name: _jsonable(getattr(settings, name)) for name in JOB_FIELDS}
    proposed["store"] = without_password(settings.store)  # never kept in shared state
    stored = await frontier.job_settings(proposed if create else None)
    if stored is None:
        raise ConfigError(
            "job",
            f"job {settings.job!r} has not been seeded: start it with `crawlq seed` or "
            "`crawlq crawl --frontier …` first",
        )
    conflicts = [
        f"{name}={stored[name]!r} (given {proposed[name]!r})"
        for name in JOB_FIELDS
        if name in settings.explicit and name in stored and not _same(name, stored, proposed)
    ]
    if conflicts:
        raise ConfigError(
            conflicts[0].split("=", 1)[0],
            "the job was started with "
            + ", ".join(conflicts)
            + "; leave these out to use the job's values, or use another --job",
        )
    adopted = {name: stored[name] for name in JOB_FIELDS if name in stored}
    for name in ("allowed_domains", "seed_hosts", "include", "exclude"):
        if name in adopted:
            adopted[name] = tuple(adopted[name])
    if "hosts" in adopted:
        adopted["hosts"] = tuple(tuple(entry) for entry in adopted["hosts"])
    if "store" in settings.explicit:  # the same store: keep the password this worker gave
        adopted.pop("store", None)
    return dataclasses.replace(settings, **adopted)


def _same(name: str, stored: dict[str, Any], proposed: dict[str, Any]) -> bool:
    """Whether the job's value of ``name`` and this process's agree.

    A store's password, or the lack of one, does not count: jobs store none (and jobs
    seeded by an older crawlq may hold one).
    """
    if name == "store" and isinstance(stored[name], str):
        return without_password(stored[name]) == without_password(proposed[name])
    return bool(stored[name] == proposed[name])


def with_seed_hosts(settings: Settings, requests: Iterable[CrawlRequest]) -> Settings:
    """``settings`` with the hosts of ``requests`` added to ``seed_hosts`` (bare, in order).

    The value is computed, not given: it is not added to ``settings.explicit``, so a job
    that already exists keeps its own seed hosts instead of refusing the producer.
    """
    hosts = dict.fromkeys(bare_host(h) for h in settings.seed_hosts)
    hosts.update(dict.fromkeys(bare_host(r.host) for r in requests))
    return dataclasses.replace(settings, seed_hosts=tuple(h for h in hosts if h))


async def new_private_seed_hosts(proposed: Settings, job: Settings) -> list[str]:
    """Seed hosts of a producer that the job's guard refuses: the job does not exempt them.

    A host counts when it is not among the job's ``seed_hosts`` (and the job does not
    ``allow_private``) and it is an IP literal in a refused range, or a name that resolves
    (now, through the system resolver) to a refused address. Lookups that fail or take
    longer than `_LOOKUP_TIMEOUT_S` seconds count as not private: this only decides a warning.

    Args:
        proposed: The producer's settings (`with_seed_hosts` applied).
        job: The settings in force after `bind_job`.

    Returns:
        The hosts, in the order of ``proposed.seed_hosts``.
    """
    guard = AddressGuard.of(allow_private=job.allow_private, hosts=job.seed_hosts)
    new = [h for h in proposed.seed_hosts if not guard.exempt(h)]
    if not new:
        return []
    private = [h for h in new if is_ip_literal(h) and guard.check_literal(h) is not None]
    names = [h for h in new if not is_ip_literal(h)][:_LOOKUP_MAX_HOSTS]
    if names:
        loop = asyncio.get_running_loop()
        lookups = [loop.getaddrinfo(h, None, type=socket.SOCK_STREAM) for h in names]
        try:
            answers = await asyncio.wait_for(
                asyncio.gather(*lookups, return_exceptions=True), _LOOKUP_TIMEOUT_S
            )
        except TimeoutError:
            answers = []
        for host, answer in zip(names, answers, strict=False):
            if isinstance(answer, BaseException):
                continue
            if any(guard.check(host, str(info[4][0])) is not None for info in answer):
                private.append(host)
    return [h for h in new if h in private]


def default_job_name(seeds: Sequence[str]) -> str:
    """A job name derived from the seeds: the first seed's host and a hash of all of them.

    ``http://127.0.0.1:8000/index.html`` -> ``127.0.0.1-8000-<8 hex digits>``. The same
    seeds always give the same name, so re-running a crawl command resumes its job. The name
    always satisfies `crawlq.settings.JOB_NAME_RULE`: other characters of the host become
    ``-`` and it is cut to its first `_HOST_PART_MAX` characters.

    Raises:
        ConfigError: There are no seeds.
    """
    if not seeds:
        raise ConfigError("job", "no seeds to derive a job name from: give --job NAME")
    host = re.sub(r"[^A-Za-z0-9.-]+", "-", host_key(seeds[0])).strip("-")
    host = host[:_HOST_PART_MAX].rstrip("-").lstrip(".-") or "job"
    digest = hashlib.sha1("\n".join(sorted(seeds)).encode(), usedforsecurity=False).hexdigest()
    return check_job_name(f"{host}-{digest[:8]}")


_HOST_PART_MAX = 191
"""Most characters of the host in a derived job name: with ``-`` and 8 hex digits, 200."""
