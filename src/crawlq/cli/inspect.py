"""``crawlq inspect URL``: where one URL is in a crawl, and what came of it.

The story joins the frontier's state and the store's record (`crawlq.ops.story`; for a
job of the Celery engine, `crawlq.celery.operate`). Exit status: 0 when the story was told
(``never_seen`` included), 1 when a backend cannot be read, 2 for bad input (a URL crawlq
cannot crawl, a job or file that does not exist).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any

import click

from crawlq.cli.jobview import BadInput, JobView, open_view
from crawlq.cli.options import wide_option
from crawlq.cli.reports import story_table
from crawlq.cli.terminal import stdout_console
from crawlq.errors import CrawlqError, InvalidURL
from crawlq.ops.story import UrlStory, native_story
from crawlq.settings import Settings
from crawlq.urls import UrlKeys, UrlRules, url_keys

__all__ = ["inspect"]


@click.command()
@click.argument("url")
@click.option(
    "--frontier",
    default=None,
    help="redis://[:password@]host:port/db (or rediss://, unix://) of a shared job, or a "
    "SQLite frontier file "
    "(default: embedded in --store).",
)
@click.option("--job", default=None, help="The job name (with a Redis frontier).")
@click.option(
    "--store",
    default=None,
    help="The store: a SQLite file [crawlq.db] or postgresql://… (default for a job: its own).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for scripts.")
@wide_option
def inspect(
    url: str, frontier: str | None, job: str | None, store: str | None, as_json: bool, wide: bool
) -> None:
    """Tell URL's story: canonical form, fingerprint, and where it is in the crawl.

    Queued (priority, depth, ready at), in flight (worker, lease deadline), delayed (attempt,
    due time, last error), stored (status, fetched at, WARC file and offset, items, error),
    dead (reason, attempts, last error, the page that linked to it), filtered (reason), or
    never seen. A running embedded crawl can be inspected: its file is read, not locked.
    """
    try:
        keys = url_keys(url)
    except InvalidURL as exc:
        raise click.BadParameter(f"{url!r}: {exc.reason}", param_hint="URL") from None
    try:
        story = asyncio.run(_story(keys, frontier, job, store))
    except BadInput as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from None
    except CrawlqError as exc:
        click.echo(f"crawlq: cannot inspect {keys.url}: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(story.to_json(), indent=2))
    else:
        stdout_console(wide=wide).print(story_table(story.to_json()))


async def _story(
    keys: UrlKeys, frontier: str | None, job: str | None, store: str | None
) -> UrlStory:
    async with open_view(frontier, job, store) as view:
        return await tell(view, job_url_keys(keys, view.settings))


def job_url_keys(keys: UrlKeys, settings: Mapping[str, Any] | None) -> UrlKeys:
    """``keys`` as the crawl saw the URL: after the job's URL rules (``strip_url_params``).

    A crawl strips session and tracking parameters from every URL before fingerprinting it
    (`crawlq.urls.UrlRules`), so ``…/a?utm_source=x`` is looked up as ``…/a``. The rules are
    the job's stored ones; an embedded crawl stores none, so it gets the default list.
    """
    params = (settings or {}).get("strip_url_params")
    if not isinstance(params, list | tuple) or not all(isinstance(p, str) for p in params):
        params = Settings().strip_url_params
    rewritten = UrlRules(params).apply(keys.url)
    return keys if rewritten == keys.url else url_keys(rewritten)


async def tell(view: JobView, keys: UrlKeys) -> UrlStory:
    """The story of one URL in an open crawl."""
    fp = keys.get_fingerprint
    stored = None
    problem = view.store_problem
    if view.store is not None:
        try:
            stored = (await view.store.lookup([fp])).get(fp)
        except CrawlqError as exc:
            problem = str(exc)
    if view.celery is not None:
        from crawlq.celery.operate import celery_story

        return await celery_story(keys, view.celery, stored, store_problem=problem)
    return native_story(keys, await view.frontier.inspect(fp), stored, store_problem=problem)
