"""The page record of a response (`page_record`), archived first when the crawl writes WARC."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from crawlq.engine.deps import Deps
from crawlq.errors import StoreError
from crawlq.records import PageRecord
from crawlq.request import CrawlRequest, FetchResult, Lease

if TYPE_CHECKING:
    from crawlq.store.warc import WarcLocation, WarcWriter

__all__ = ["page_record"]

logger = logging.getLogger(__name__)


async def page_record(
    lease: Lease,
    result: FetchResult,
    deps: Deps,
    *,
    final_url: str,
    title: str | None,
    error: str | None,
    canonical_url: str | None = None,
) -> PageRecord:
    """The page record of a response, archived first when the crawl writes WARC files."""
    req = lease.request
    page = PageRecord(
        fingerprint=req.record_fingerprint,
        url=req.url,
        final_url=final_url,
        status=result.status,
        content_type=result.content_type,
        depth=req.depth,
        title=title,
        fetched_at=time.time(),
        size_bytes=len(result.body),
        elapsed_s=result.elapsed_s,
        attempt=lease.attempt,
        error=error,
        spider=deps.spider.name,
        body=result.body if deps.settings.store_body else None,
        canonical_url=canonical_url,
        referrer=req.referrer,
        request=req.to_json(),
    )
    if deps.warc is not None:
        warc = await _archive(deps.warc, req, result, page.fetched_at)
        if warc is not None:
            page = dataclasses.replace(page, warc_file=warc.file, warc_offset=warc.offset)
    return page


async def _archive(
    warc: WarcWriter, req: CrawlRequest, result: FetchResult, fetched_at: float
) -> WarcLocation | None:
    """Write the page's WARC records; on failure (disk full) log it and store it unarchived."""
    try:
        return await warc.write(result, fetched_at=fetched_at)
    except StoreError as exc:
        logger.error("cannot archive %s, storing the page without WARC records: %s", req.url, exc)
        return None
