"""Run a spider's callbacks again over stored responses, without fetching anything.

``crawlq reparse`` calls `Reparse`: after fixing a spider that raised on some pages, its
callbacks rerun on the bodies the crawl kept (``--store-body``) or archived (``--warc DIR``
or ``--warc s3://bucket/prefix``: `crawlq.store.warc.reader.WarcArchive`),
and each page's items and error are replaced in the store (`crawlq.store.Store.replace_parse`,
idempotent: items are keyed by page fingerprint and index). No HTTP request is sent: there is
no fetcher here.

What runs is the parse step of the crawl itself (`crawlq.engine.parse.parse_response`): the
same statuses reach the callbacks (2xx and the spider's ``handle_httpstatus_list``; redirects
never), with the same HTML screening, ``parse_timeout_s`` and ``max_links_per_page``. Each
page's callback is the one its request named (the store keeps the request, with its
``cb_kwargs`` and ``meta``; pages stored before crawlq kept it get ``parse`` and no meta).

Trust: the spider comes from the caller (the command line's ``--spider``), never from the
store; WARC files are read from the caller's directory, by plain file name only. A page that
another spider parsed (its ``spider`` name differs) is left alone unless ``all_spiders``.

Requests the callbacks yield are counted, not followed: reparse crawls nothing. Differences
from the crawl: a body kept with ``--store-body`` is decoded without the ``charset`` of its
``Content-Type`` header (the store keeps the media type only), so by ``<meta charset>`` or
detection; a WARC record keeps every header.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crawlq.engine.item_flow import ItemFlow
from crawlq.engine.pagework import PageWork
from crawlq.engine.parse import parse_response
from crawlq.engine.plan import reparse_scope
from crawlq.errors import InvalidURL, StoreError
from crawlq.links import LinkRules
from crawlq.records import PageRecord, spider_error_type
from crawlq.request import CrawlRequest, FetchResult
from crawlq.settings import Settings
from crawlq.spider import Spider
from crawlq.store import ParseUpdate, Store
from crawlq.web.decode import decode_body

if TYPE_CHECKING:
    from crawlq.store.warc.reader import WarcArchive

__all__ = ["FLUSH_PAGES", "Reparse", "ReparseReport"]

logger = logging.getLogger(__name__)

FLUSH_PAGES = 64
"""Pages whose new parse results are written to the store in one transaction."""


@dataclass(slots=True)
class ReparseReport:
    """What a reparse did.

    Attributes:
        seen: Pages read from the store (with ``errors_only``, those with a spider error).
        reparsed: Pages whose callback ran again.
        updated: Pages whose error and items were replaced in the store.
        fixed: Pages that had a spider error and have none now.
        failing: Pages with a spider error after the rerun, by kind.
        items: Items written.
        requests: Requests the callbacks yielded (none is followed).
        no_body: Pages skipped: no body kept and no WARC record to read (``no_warc_dir``:
            the record exists but no WARC directory was given).
        no_warc_dir: Of ``no_body``, the pages whose WARC record needs ``--warc DIR``.
        unreadable: Pages skipped: their WARC record could not be read (logged).
        not_parsed: Pages skipped because their status never reaches a callback, by status.
        refreshes: Pages skipped because they are meta refreshes (the crawl followed them
            as redirects; no callback ran on them).
        other_spider: Pages skipped because another spider parsed them, by spider name.
        changed: Pages fetched again (or gone) while this ran: the newer record was kept.
        stopped: `Reparse.stop` ended the run before every selected page was read.
        elapsed_s: Wall seconds.
    """

    seen: int = 0
    reparsed: int = 0
    updated: int = 0
    fixed: int = 0
    failing: Counter[str] = field(default_factory=Counter)
    items: int = 0
    requests: int = 0
    no_body: int = 0
    no_warc_dir: int = 0
    unreadable: int = 0
    not_parsed: Counter[int] = field(default_factory=Counter)
    refreshes: int = 0
    other_spider: Counter[str] = field(default_factory=Counter)
    changed: int = 0
    stopped: bool = False
    elapsed_s: float = 0.0


class Reparse:
    """Rerun ``spider``'s callbacks over the pages of ``store`` (module docstring).

    Args:
        store: The open store; written through `crawlq.store.Store.replace_parse`.
        spider: The spider whose callbacks run (the caller's own code).
        settings: Limits (``parse_timeout_s``, ``max_links_per_page``, ``max_html_depth``,
            ``max_body_bytes``), scope (which yielded requests count as in scope) and
            ``warc_dir``, the directory of the WARC files the pages point to (None: read
            stored bodies only).
        errors_only: Only pages whose error is a spider error.
        all_spiders: Also pages that a spider of another name parsed.
    """

    def __init__(
        self,
        store: Store,
        spider: Spider,
        settings: Settings,
        *,
        errors_only: bool = False,
        all_spiders: bool = False,
    ) -> None:
        self.store = store
        self.spider = spider
        self.settings = settings
        self.errors_only = errors_only
        self.all_spiders = all_spiders
        self.scope = reparse_scope(settings, spider)
        self.link_rules = LinkRules.from_settings(settings)
        self.items = ItemFlow(spider, settings, None)  # pipelines; no dedup: no frontier
        self.report = ReparseReport()
        self._stopping = False
        self._archive: WarcArchive | None = None

    def stop(self) -> None:
        """Stop after the page in hand; what was reparsed so far is written."""
        self._stopping = True

    async def run(self) -> ReparseReport:
        """Reparse every selected page; write the results in batches of `FLUSH_PAGES`.

        Raises:
            StoreUnavailable, StoreError: The store cannot be read or written, or the WARC
                object store (``s3://…``) cannot be reached. Results not yet written are
                lost; running again redoes them (it is idempotent).
            ConfigError: ``warc_dir`` is ``s3://…`` and boto3 is missing.
        """
        started = time.monotonic()
        if self.settings.warc_dir is not None:
            from crawlq.store.warc.reader import WarcArchive  # needs the warc extra

            self._archive = await asyncio.to_thread(
                WarcArchive.open, self.settings.warc_dir, spool_dir=self.settings.warc_spool_dir
            )
        pages = PageWork()
        pending: list[ParseUpdate] = []
        try:
            async for page in self.store.pages(with_body=True, spider_errors_only=self.errors_only):
                self.report.seen += 1
                update = await self._reparse(page, pages)
                if update is not None:
                    pending.append(update)
                if len(pending) >= FLUSH_PAGES:
                    await self._write(pending)
                    pending = []
                if self._stopping:
                    self.report.stopped = True
                    break
            await self._write(pending)
        finally:
            await self.items.close()
            pages.close()
            self.report.elapsed_s = time.monotonic() - started
        return self.report

    async def _reparse(self, page: PageRecord, pages: PageWork) -> ParseUpdate | None:
        r = self.report
        if page.spider != self.spider.name and not self.all_spiders:
            r.other_spider[page.spider] += 1
            return None
        if 300 <= page.status < 400 or not self.spider.wants_status(page.status):
            r.not_parsed[page.status] += 1  # the crawl gave it to no callback either
            return None
        result = await self._response(page)
        if result is None:
            return None
        req = _request_of(page)
        parsed = await parse_response(
            req,
            result,
            self.spider,
            self.scope,
            self.settings,
            pages,
            self.link_rules,
            items=self.items,
        )
        if parsed.refresh_url is not None:  # the crawl followed it as a redirect: no callback
            r.refreshes += 1
            return None
        r.reparsed += 1
        r.requests += len(parsed.links) + sum(parsed.skipped.values())
        kind = spider_error_type(parsed.error)
        if kind is not None:
            r.failing[kind] += 1
        elif spider_error_type(page.error) is not None:
            r.fixed += 1
        return ParseUpdate(
            page.fingerprint, page.fetched_at, parsed.error, self.spider.name, parsed.items
        )

    async def _response(self, page: PageRecord) -> FetchResult | None:
        """The stored response of ``page``: its kept body, else its WARC record, else None."""
        headers: dict[str, str]
        if page.body is not None:
            body = page.body
            headers = {"content-type": page.content_type} if page.content_type else {}
        elif page.warc_file is not None and page.warc_offset is not None:
            if self._archive is None:
                self.report.no_body += 1
                self.report.no_warc_dir += 1
                return None
            try:
                record = await asyncio.to_thread(
                    self._archive.read,
                    page.warc_file,
                    page.warc_offset,
                    max_body_bytes=self.settings.max_body_bytes,
                )
            except StoreError as exc:
                logger.error("cannot reparse %s: %s", page.url, exc)
                self.report.unreadable += 1
                return None
            body, headers = record.body, _joined(record.headers)
        else:
            self.report.no_body += 1
            return None
        encoding, text = decode_body(headers.get("content-type"), body)
        return FetchResult(
            url=page.url,
            final_url=page.final_url,
            status=page.status,
            headers=headers,
            body=body,
            encoding=encoding,
            text=text,
            elapsed_s=page.elapsed_s,
        )

    async def _write(self, updates: list[ParseUpdate]) -> None:
        if not updates:
            return
        updated = await self.store.replace_parse(updates)
        self.report.updated += len(updated)
        self.report.changed += len(updates) - len(updated)
        self.report.items += sum(len(u.items) for u in updates if u.fingerprint in updated)


def _request_of(page: PageRecord) -> CrawlRequest:
    """The request the page answered: as stored with it, else a plain GET of its URL."""
    if page.request is not None:
        try:
            request = CrawlRequest.from_json(page.request)
        except (ValueError, InvalidURL) as exc:
            logger.warning(
                "%s: its stored request is unreadable (%s); using parse()", page.url, exc
            )
        else:
            if request.fingerprint == page.fingerprint:
                return request
            logger.warning("%s: its stored request is another URL's; using parse()", page.url)
    return CrawlRequest(page.url, depth=page.depth)


def _joined(headers: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Headers as `FetchResult` holds them: names lower-cased, repeats joined with ", "."""
    out: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out
