"""``crawlq seed``: the producer side: push seed URLs into a job's frontier (deduplicated)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from typing import Any

import click

from crawlq.cli.option_settings import build_settings, option_error
from crawlq.cli.options import (
    frontier_options,
    guard_options,
    job_options,
    sitemap_option,
    sitemap_urls,
)
from crawlq.engine.plan import check_process_code
from crawlq.engine.seeding import SeedSpool
from crawlq.engine.seeding import seed as seed_job
from crawlq.errors import (
    ConfigError,
    CrawlqError,
    InvalidURL,
    NothingToSeed,
    SeedInterrupted,
)
from crawlq.rules.scope import check_url_length
from crawlq.secrecy import redact
from crawlq.settings import Settings
from crawlq.sitemap import sitemap_request
from crawlq.spider import load_spider, new_spider, start_requests_of

__all__ = ["seed"]


@click.command()
@click.argument("urls", nargs=-1, metavar="URL... | -")
@click.option("--priority", type=int, default=0, show_default=True, help="Higher runs sooner.")
@click.option("--retry-dead", is_flag=True, help="Also requeue the job's dead letters.")
@sitemap_option
@job_options
@guard_options
@frontier_options(required=False)
def seed(
    urls: tuple[str, ...], priority: int, retry_dead: bool, sitemap: tuple[str, ...], **options: Any
) -> None:
    """Queue URL... (or, with -, one URL or JSON request per line of stdin) in a job.

    Each --sitemap URL is queued as a sitemap: the URLs it lists are crawled.

    With no URLs, creates the job (its settings) for producers that feed its inbox
    directly: `crawlq seed --frontier redis://… --job J --allow-domain example.com`. A new
    job needs a scope: with no URL (or - on empty stdin) and no --allow-domain (nor a
    --spider with allowed_domains), the command is refused (exit 2) and no job is created.
    On a job that exists, no URL is fine ("queued 0 new of 0": a producer's empty batch,
    the job's scope is set already).

    With --spider, the spider is loaded and checked first, as by `crawlq crawl` (a spider
    that cannot be loaded, or whose __init__ or start_requests raises, stops the command
    before the job is created); with no URL and no --sitemap, its start_urls (or
    start_requests) are the seeds, as for `crawlq crawl --spider`.

    The first seed of a job stores its settings (politeness, retries, scope — by default the
    seeds' hosts —, spider, store, and the seed hosts exempt from the private-address guard)
    for every worker that joins. URLs that only reach the job through its inbox are never
    seed hosts; use --allow-private to crawl private addresses on any host. Every input is checked
    before anything is queued: an invalid one stops the command (exit 2) and names it. Stdin is
    read to its end first (kept in a temporary file, not in memory), then queued in batches.
    JSON requests look like {"url": "...", "priority": 5, "meta": {...}}.
    """
    numbered: Iterable[tuple[str, str]] = ((f"input {n}", url) for n, url in enumerate(urls, 1))
    given = "no URLs given"  # what the input was, when it held no seed
    if list(urls) == ["-"]:  # numbered by line of stdin, blank lines included, to find them
        numbered = ((f"line {n}", t.strip()) for n, t in enumerate(sys.stdin, 1) if t.strip())
        given = "stdin held no URLs"
    with SeedSpool() as spool:
        spool.read_lines(numbered, priority=priority)  # read once, kept on disk, not in memory
        if spool.bad_count:
            more = spool.bad_count - len(spool.bad)
            raise click.UsageError(
                "nothing queued; bad input:\n  "
                + "\n  ".join(spool.bad)
                + (f" (and {more} more)" if more else "")
            )
        sitemaps = sitemap_urls(sitemap)
        settings, spider_domains = _checked_settings(spool, bool(sitemaps), options)
        if not spool.given and not sitemaps and not options.get("frontier"):
            raise click.UsageError("no URLs to seed: give URL... or - for stdin")
        if options.get("spider") is not None and not urls:
            given = f"spider {options['spider']} has no start requests"
        for url in sitemaps:
            spool.add(sitemap_request(url, priority=priority))
        _seed(spool, retry_dead, settings, spider_domains, given)


def _checked_settings(
    spool: SeedSpool, sitemaps: bool, options: dict[str, Any]
) -> tuple[Settings, tuple[str, ...]]:
    """The settings and the spider's allowed domains, the spider checked as ``crawl`` does.

    A spider that cannot be imported, whose ``__init__`` or ``start_requests`` raises, or
    whose middlewares, pipelines or item type cannot be loaded
    (`crawlq.engine.plan.check_process_code`) stops the command before the job is created.
    With no URL and no --sitemap, the spider's start requests (``start_urls``,
    ``sitemap_urls`` or its own ``start_requests``) are the seeds, as for ``crawl``.

    Raises:
        click.UsageError: A setting or the spider is wrong; the message names it.
    """
    if options.get("spider") is None:
        return build_settings(options), ()
    try:
        spider_cls = load_spider(options["spider"])
        settings = build_settings(options, spider_cls)
        spider = new_spider(spider_cls)
        check_process_code(settings, spider)
        if not spool.given and not sitemaps:
            for request in start_requests_of(spider):
                check_url_length(request.url)
                spool.add(request)
    except InvalidURL as exc:
        raise click.UsageError(f"spider {options['spider']}: start request: {exc}") from None
    except ConfigError as exc:
        raise option_error(exc, options) from None
    return settings, tuple(spider.allowed_domains)


def _seed(
    spool: SeedSpool,
    retry_dead: bool,
    settings: Settings,
    spider_domains: tuple[str, ...],
    given: str,
) -> None:
    """Push the checked seeds of ``spool`` into the job ``settings`` name; print the count.

    ``given`` says what the input was when it held no seed, for the refusal of a new job
    with no scope (`NothingToSeed`).
    """
    try:
        result = asyncio.run(
            seed_job(settings, spool, retry_dead=retry_dead, spider_domains=spider_domains)
        )
    except NothingToSeed as exc:
        raise click.UsageError(
            f"{given}: nothing to seed and no domains to scope job {exc.job!r}; give URL... "
            "(or - with URLs on stdin), or --allow-domain DOMAIN to create the job for "
            "producers that feed its inbox (no job was created)"
        ) from None
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except SeedInterrupted as exc:  # part of it is queued: say how much, and how to resume
        click.echo(f"crawlq: seed incomplete: {exc}", err=True)
        sys.exit(1)
    except CrawlqError as exc:
        click.echo(f"crawlq: cannot seed: {exc}", err=True)
        sys.exit(1)
    where = f"job {result.settings.job}" if result.settings.job else redact(result.settings.store)
    click.echo(f"queued {result.queued} new of {result.given} in {where}")
