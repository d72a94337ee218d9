"""Crawl planning: options + spider + seeds -> the job's settings, for every command and engine.

Before anything is opened, a producer turns what it was given into the settings its job will
store (`crawlq.engine.job.bind_job`):

* the start requests: the seeds (or the spider's ``start_urls`` and ``sitemap_urls``), each
  checked against `crawlq.request.MAX_URL_LENGTH` (`crawlq.rules.scope.check_url_length`);
* the allowed domains (`crawlq.rules.scope.crawl_domains`: settings, else spider, else seed hosts);
* the seed hosts, exempt from the private-address guard (`with_seed_hosts`);
* an absolute store path (`absolute_store`: a job's workers may run in another directory;
  `absolute_local` and `same_local_file` for every setting that names a local file);
* on a shared frontier, the job's name when none was given (`default_job_name`).

``crawlq crawl`` (both engines) calls `plan_crawl`, ``crawlq seed`` `plan_seed`; a process
that runs a spider on a bound job's settings (``crawlq worker``, the Celery runtime) gets its
scope from `spider_scope`, and ``crawlq reparse`` from `reparse_scope`.

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
import logging
import os
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from crawlq.engine.item_flow import ItemFlow
from crawlq.errors import ConfigError
from crawlq.middleware import Middlewares
from crawlq.request import CrawlRequest
from crawlq.rules.scope import Scope, check_url_length, crawl_domains
from crawlq.settings import Settings, check_job_name
from crawlq.settings.archive import names_a_scheme
from crawlq.spider import Spider, new_spider, sitemap_rules_of, spider_file, start_requests_of
from crawlq.spider.item_type import items_table_of
from crawlq.urls import host_key
from crawlq.web.addresses import AddressGuard, bare_host, is_ip_literal

__all__ = [
    "CrawlPlan",
    "absolute_local",
    "absolute_store",
    "check_process_code",
    "default_job_name",
    "local_path",
    "new_private_seed_hosts",
    "plan_crawl",
    "plan_seed",
    "reparse_scope",
    "same_local_file",
    "spider_scope",
    "warn_private_seed_hosts",
    "with_seed_host_names",
    "with_seed_hosts",
]

logger = logging.getLogger(__name__)


_HOST_PART_MAX = 191
"""Most characters of the host in a derived job name: with ``-`` and 8 hex digits, 200."""


@dataclass(frozen=True, slots=True)
class CrawlPlan:
    """What `plan_crawl` decided.

    Attributes:
        settings: The job's settings (domains, seed hosts, job name, absolute store).
        spider: The spider instance that runs (its ``start_urls`` replaced by the seeds).
        start_requests: The seed requests, in order.
    """

    settings: Settings
    spider: Spider
    start_requests: list[CrawlRequest]


def absolute_store(settings: Settings) -> Settings:
    """``settings`` with a store file path made absolute (`absolute_local`).

    A database URL (``…://…`` other than ``sqlite:///``) is left as it is.
    A job's workers may run in another directory: the job never stores a cwd-relative path.
    """
    store = absolute_local("store", settings.store)
    return settings if store == settings.store else dataclasses.replace(settings, store=store)


def local_path(name: str, value: str | None) -> str | None:
    """The local file or directory that the setting ``name`` = ``value`` names, as written.

    ``store``: a SQLite file path or ``sqlite:///PATH`` (None for a database URL);
    ``warc_dir``: the directory (None for ``s3://…``); ``spider``: the file of ``file.py:Class``
    (`crawlq.spider.spider_file`; None for ``module:Class``). None for other settings.
    """
    if value is None:
        return None
    if name == "spider":
        return spider_file(value)
    if name == "warc_dir":
        return None if names_a_scheme(value) else value  # s3://bucket/prefix: not a path
    if name == "store":
        if value.startswith("sqlite:///"):
            return value.removeprefix("sqlite:///")
        return None if "://" in value else value
    return None


def absolute_local(name: str, value: str) -> str:
    """``value`` with the local path it names (`local_path`) made absolute.

    Absolute against this process's working directory, ``~`` expanded; symlinks are kept as
    written. Other values are returned unchanged.

    ``crawlq.db`` -> ``/home/me/crawl/crawlq.db``; ``sqlite:///crawlq.db`` ->
    ``sqlite:////home/me/crawl/crawlq.db``; ``spiders/s.py:S`` ->
    ``/home/me/crawl/spiders/s.py:S``.
    """
    path = local_path(name, value)
    if path is None:
        return value
    full = os.path.abspath(os.path.expanduser(path))
    if name == "spider":
        return full + value[len(path) :]
    return "sqlite:///" + full if value.startswith("sqlite:///") else full


def same_local_file(name: str, a: str | None, b: str | None) -> bool:
    """Whether ``a`` and ``b``, two values of the setting ``name``, name the same local file.

    Both paths are resolved here (absolute against this process's working directory, ``~``
    expanded, symlinks followed: nothing is opened); a spider's class names must be equal
    too. False when either names no local file (`local_path`).
    """
    path_a, path_b = local_path(name, a), local_path(name, b)
    if path_a is None or path_b is None or a is None or b is None:
        return False
    if name == "spider" and a.rpartition(":")[2] != b.rpartition(":")[2]:  # the class
        return False
    return _resolved(path_a) == _resolved(path_b)


def _resolved(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def plan_crawl(
    settings: Settings,
    seeds: Sequence[str] = (),
    spider_cls: type[Spider] = Spider,
    *,
    sitemaps: Sequence[str] = (),
) -> CrawlPlan:
    """Plan a ``crawlq crawl`` (the native engine, one or several processes, or Celery).

    Args:
        settings: The command's settings.
        seeds: Seed URLs; with ``sitemaps`` they replace the spider's ``start_urls`` and
            ``sitemap_urls`` when either is given.
        spider_cls: The spider class.
        sitemaps: Sitemap URLs to read; their hosts count as seed hosts.

    Raises:
        InvalidURL: A seed URL cannot be crawled (too long, or not a URL).
        ConfigError: No seeds at all, the spider's ``sitemap_rules``/``sitemap_follow``
            are wrong, its ``__init__`` or ``start_requests`` raised (named ``spider``,
            `crawlq.spider.new_spider`), or `check_process_code` refuses the code it names.
    """
    spider = new_spider(spider_cls)
    if seeds or sitemaps:
        spider.start_urls = list(seeds)
        spider.sitemap_urls = list(sitemaps)
    sitemap_rules_of(spider)  # a bad rule stops the crawl here, before anything opens
    requests = start_requests_of(spider)
    for request in requests:
        check_url_length(request.url)
    if not requests:
        raise ConfigError("seeds", "no seed URLs: give them (or --sitemap) on the command line")
    check_process_code(settings, spider)
    domains = crawl_domains(
        settings.allowed_domains, spider.allowed_domains, (r.host for r in requests)
    )
    job = settings.job
    if settings.frontier is not None and not job:
        job = default_job_name([r.url for r in requests])
    settings = absolute_store(dataclasses.replace(settings, allowed_domains=domains, job=job))
    return CrawlPlan(with_seed_hosts(settings, requests), spider, requests)


def check_process_code(settings: Settings, spider: Spider) -> None:
    """Load the code and typed table this process's settings and spider name, or raise.

    Called before anything is opened or created (no store file, no lock, no job in Redis),
    so a misspelt ``--downloader-middleware mw.py:Nope`` or an ``--items-table`` on a
    SQLite store leaves nothing behind: the middlewares are loaded and instantiated
    (`crawlq.middleware.Middlewares.build`; the workers build their own again), the item
    pipelines loaded and instantiated (`crawlq.engine.item_flow.ItemFlow`, not opened), the
    item type loaded and the items table checked (`crawlq.spider.item_type.items_table_of`).

    Raises:
        ConfigError: Named after the setting that is wrong (``downloader_middlewares``,
            ``spider_middlewares``, ``item_pipelines``, ``item_type``, ``items_table``).
    """
    Middlewares.build(settings, spider)
    ItemFlow(spider, settings, None)
    items_table_of(settings, type(spider))


def plan_seed(settings: Settings, hosts: Sequence[str]) -> Settings:
    """Plan a ``crawlq seed``: the job's settings for seed requests on these hosts.

    The spider is not loaded here (a producer may not have its code): the domains are the
    settings', else the seeds' hosts (`crawlq.rules.scope.crawl_domains` without a spider).

    Args:
        settings: The producer's settings.
        hosts: The seeds' hosts (`CrawlRequest.host`), in order; the seeds themselves are
            not needed, so a producer of millions keeps only these
            (`crawlq.engine.seeding.SeedSpool`).
    """
    domains = crawl_domains(settings.allowed_domains, (), hosts)
    settings = absolute_store(dataclasses.replace(settings, allowed_domains=domains))
    return with_seed_host_names(settings, hosts)


def spider_scope(settings: Settings, spider: Spider) -> Scope:
    """The scope of a process that runs ``spider`` on a job's (bound) ``settings``.

    Its domains come from `crawlq.rules.scope.crawl_domains` (the job's, else the spider's, else
    the job's seed hosts); ``Scope.allowed_domains`` is empty when none of these names one,
    and the caller decides what that means (see `crawlq.rules.scope.crawl_domains`).
    """
    domains = crawl_domains(settings.allowed_domains, spider.allowed_domains, settings.seed_hosts)
    return Scope.from_settings(settings, domains)


def reparse_scope(settings: Settings, spider: Spider) -> Scope:
    """The scope ``crawlq reparse`` counts a callback's requests against.

    The domains are those of `spider_scope` (`crawlq.rules.scope.crawl_domains`); only domains,
    include, exclude and depth apply: no URL rules or trap limits, since nothing is queued.
    """
    domains = crawl_domains(settings.allowed_domains, spider.allowed_domains, settings.seed_hosts)
    return Scope(domains, settings.include, settings.exclude, settings.max_depth)


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


_LOOKUP_TIMEOUT_S = 5.0
"""Seconds `new_private_seed_hosts` spends at most on DNS lookups, all hosts together."""
_LOOKUP_MAX_HOSTS = 50
"""Most new seed hosts `new_private_seed_hosts` looks up (it only decides a warning)."""


def with_seed_hosts(settings: Settings, requests: Iterable[CrawlRequest]) -> Settings:
    """``settings`` with the hosts of ``requests`` added to ``seed_hosts`` (bare, in order).

    The value is computed, not given: it is not added to ``settings.explicit``, so a job
    that already exists keeps its own seed hosts instead of refusing the producer.
    """
    return with_seed_host_names(settings, (r.host for r in requests))


def with_seed_host_names(settings: Settings, hosts: Iterable[str]) -> Settings:
    """``settings`` with ``hosts`` (`CrawlRequest.host` values) added to ``seed_hosts``.

    As `with_seed_hosts`, for a producer that keeps its seeds' hosts but not the seeds
    (`crawlq.engine.seeding.SeedSpool`).
    """
    names = dict.fromkeys(bare_host(h) for h in settings.seed_hosts)
    names.update(dict.fromkeys(bare_host(h) for h in hosts))
    return dataclasses.replace(settings, seed_hosts=tuple(h for h in names if h))


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


def warn_private_seed_hosts(job: Settings, hosts: Sequence[str]) -> None:
    """Log one warning naming the seed hosts that the job's private-address guard refuses.

    Args:
        job: The job's settings in force.
        hosts: From `new_private_seed_hosts`; nothing is logged when empty.
    """
    if hosts:
        logger.warning(
            "job %s: %s resolve%s to a private address but %s not among the job's seed hosts "
            "(%s): %s URLs will be filtered as private_address. Seed hosts are fixed when a "
            "job starts; start a new --job, or start the job with --allow-private",
            job.job,
            ", ".join(hosts),
            "" if len(hosts) > 1 else "s",
            "are" if len(hosts) > 1 else "is",
            ", ".join(job.seed_hosts) or "none",
            "their" if len(hosts) > 1 else "its",
        )
