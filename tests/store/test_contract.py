"""The Store contract (crawlq/store/contract.py), run on every backend by the `store` fixture."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import pytest

from crawlq.errors import StoreError
from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.store import ResultBatch, Store, StoreCounts

T = TypeVar("T")


def fp(n: int) -> bytes:
    return hashlib.sha1(f"https://example.com/{n}".encode()).digest()


def page(n: int, **changes: Any) -> PageRecord:
    record = PageRecord(
        fingerprint=fp(n),
        url=f"https://example.com/{n}",
        final_url=f"https://example.com/{n}/",
        status=200,
        content_type="text/html",
        depth=n % 4,
        title=f"Page {n} · é",
        fetched_at=1_800_000_000.0 + n,
        size_bytes=1000 + n,
        elapsed_s=0.25,
        attempt=1,
        error=None,
        spider="docs",
    )
    return dataclasses.replace(record, **changes)


def item(n: int, index: int, **changes: Any) -> ItemRecord:
    record = ItemRecord(
        fingerprint=fp(n),
        index=index,
        url=f"https://example.com/{n}",
        spider="docs",
        data={"name": f"item {n}.{index}", "price": 1.5, "tags": ["a", "b"], "ok": True},
        created_at=1_800_000_000.0 + n,
    )
    return dataclasses.replace(record, **changes)


def dead(n: int, **changes: Any) -> DeadRecord:
    record = DeadRecord(
        fingerprint=fp(n),
        url=f"https://example.com/{n}",
        reason="http_503",
        detail="Service Unavailable",
        attempts=4,
        depth=1,
        at=1_800_000_000.0 + n,
    )
    return dataclasses.replace(record, **changes)


def filtered(n: int, **changes: Any) -> FilteredRecord:
    record = FilteredRecord(
        fingerprint=fp(n),
        url=f"https://example.com/{n}",
        reason="robots_txt",
        depth=2,
        at=1_800_000_000.0 + n,
    )
    return dataclasses.replace(record, **changes)


async def collect(records: AsyncIterator[T]) -> list[T]:
    return [record async for record in records]


async def test_empty_store(store: Store) -> None:
    assert await store.counts() == StoreCounts(pages=0, items=0, dead=0, filtered=0)
    assert await collect(store.pages()) == []
    assert await collect(store.items()) == []
    assert await collect(store.dead()) == []
    assert await collect(store.filtered()) == []
    await store.write(ResultBatch())  # an empty batch is a no-op


async def test_records_round_trip(store: Store) -> None:
    pages = [page(1), page(2, title=None, error="http_404", status=404, content_type="")]
    items = [item(1, 0), item(1, 1, data={"nested": {"x": [1, None]}, "text": "ü"})]
    await store.write(ResultBatch(pages=pages, items=items, dead=[dead(3)], filtered=[filtered(4)]))
    assert await collect(store.pages()) == pages
    assert await collect(store.items()) == items
    assert await collect(store.dead()) == [dead(3)]
    assert await collect(store.filtered()) == [filtered(4)]


async def test_bodies_only_when_asked(store: Store) -> None:
    pages = [page(n, body=bytes([n % 256]) * 1000 + b"\x00") for n in range(40)]
    await store.write(ResultBatch(pages=pages))
    assert await collect(store.pages(with_body=True)) == pages
    assert [p.body for p in await collect(store.pages())] == [None] * 40


async def test_warc_locations_round_trip_and_are_overwritten(store: Store) -> None:
    archived = [
        page(n, warc_file=f"crawlq-{n % 3}.warc.gz", warc_offset=n * 2**33) for n in range(5)
    ]
    await store.write(ResultBatch(pages=[*archived, page(9)]))
    stored = await collect(store.pages())
    assert stored == [*archived, page(9)]  # offsets beyond 4 GiB survive; None stays None
    assert [(p.warc_file, p.warc_offset) for p in stored][-1] == (None, None)
    assert await collect(store.pages(with_body=True)) == stored  # no body was stored

    again = page(2, warc_file="crawlq-later.warc.gz", warc_offset=7, body=b"<p>x</p>")
    unarchived = page(3, attempt=2)  # re-fetched by a worker without --warc
    await store.write(ResultBatch(pages=[again, unarchived]))
    by_url = {p.url: p for p in await collect(store.pages(with_body=True))}
    assert by_url[again.url] == again
    assert by_url[unarchived.url] == unarchived
    assert (await store.counts()).pages == 6


async def test_canonical_urls_round_trip_and_are_overwritten(store: Store) -> None:
    pages = [page(1, canonical_url="https://example.com/the-one?a=1"), page(2)]
    await store.write(ResultBatch(pages=pages))
    assert await collect(store.pages()) == pages
    again = page(1, attempt=2)  # the page no longer names one
    await store.write(ResultBatch(pages=[again]))
    assert [p.canonical_url for p in await collect(store.pages())] == [None, None]


async def test_same_page_twice_is_one_row_with_the_second_values(store: Store) -> None:
    await store.write(ResultBatch(pages=[page(1)]))
    second = page(1, status=301, title="Moved", attempt=2, fetched_at=1_900_000_000.0)
    await store.write(ResultBatch(pages=[second]))
    assert await collect(store.pages()) == [second]
    counts = await store.counts()
    assert (counts.pages, counts.pages_by_status) == (1, {301: 1})


async def test_writing_the_same_batch_again_changes_nothing(store: Store) -> None:
    batch = ResultBatch(
        pages=[page(1), page(2)],
        items=[item(1, 0), item(1, 1), item(2, 0)],
        dead=[dead(3)],
        filtered=[filtered(4)],
    )
    await store.write(batch)
    first = await store.counts()
    await store.write(batch)
    assert await store.counts() == first
    assert (first.pages, first.items, first.dead, first.filtered) == (2, 3, 1, 1)


async def test_rewriting_a_page_replaces_its_items_as_a_whole(store: Store) -> None:
    await store.write(ResultBatch(pages=[page(1), page(2)], items=[item(1, i) for i in range(3)]))
    await store.write(ResultBatch(pages=[page(2)], items=[item(2, 0)]))
    fewer = item(1, 0, data={"name": "only one now"})
    await store.write(ResultBatch(pages=[page(1)], items=[fewer]))
    assert await collect(store.items()) == [fewer, item(2, 0)]
    await store.write(ResultBatch(pages=[page(1)]))  # no items with the page: none remain
    assert await collect(store.items()) == [item(2, 0)]


def _batch_of(kind: str, n: int) -> ResultBatch:
    if kind == "page":
        return ResultBatch(pages=[page(n)], items=[item(n, 0)])
    if kind == "dead":
        return ResultBatch(dead=[dead(n)])
    return ResultBatch(filtered=[filtered(n)])


KINDS = ("page", "dead", "filtered")


@pytest.mark.parametrize(
    ("first", "second"), [(a, b) for a in KINDS for b in KINDS if a != b], ids=str
)
async def test_a_fingerprint_has_one_outcome_the_latest(
    store: Store, first: str, second: str
) -> None:
    await store.write(_batch_of(first, 7))
    await store.write(_batch_of(second, 7))
    counts = await store.counts()
    expected = {
        "page": (1 if second == "page" else 0),
        "dead": (1 if second == "dead" else 0),
        "filtered": (1 if second == "filtered" else 0),
    }
    assert (counts.pages, counts.dead, counts.filtered) == (
        expected["page"],
        expected["dead"],
        expected["filtered"],
    )
    assert counts.items == expected["page"]  # a page's items go when the page goes
    assert counts.settled == 1


async def test_within_one_batch_page_beats_dead_beats_filtered(store: Store) -> None:
    await store.write(
        ResultBatch(
            pages=[page(1)],
            dead=[dead(1), dead(2)],
            filtered=[filtered(1), filtered(2), filtered(3)],
        )
    )
    assert [p.fingerprint for p in await collect(store.pages())] == [fp(1)]
    assert [d.fingerprint for d in await collect(store.dead())] == [fp(2)]
    assert [f.fingerprint for f in await collect(store.filtered())] == [fp(3)]


async def test_within_one_batch_the_later_record_of_a_key_wins(store: Store) -> None:
    await store.write(
        ResultBatch(
            pages=[page(1, status=500), page(1, status=200)],
            items=[item(1, 0, data={"v": 1}), item(1, 0, data={"v": 2})],
            dead=[dead(2, reason="timeout"), dead(2, reason="http_503")],
        )
    )
    assert [p.status for p in await collect(store.pages())] == [200]
    assert [i.data for i in await collect(store.items())] == [{"v": 2}]
    assert [d.reason for d in await collect(store.dead())] == ["http_503"]


async def test_counts_by_status_and_reason(store: Store) -> None:
    await store.write(
        ResultBatch(
            pages=[page(1), page(2), page(3, status=404), page(4, status=301)],
            items=[item(1, 0), item(1, 1), item(3, 0)],
            dead=[dead(10), dead(11), dead(12, reason="timeout")],
            filtered=[filtered(20), filtered(21, reason="max_depth")],
        )
    )
    assert await store.counts() == StoreCounts(
        pages=4,
        items=3,
        dead=3,
        filtered=2,
        pages_by_status={200: 2, 404: 1, 301: 1},
        dead_by_reason={"http_503": 2, "timeout": 1},
        filtered_by_reason={"robots_txt": 1, "max_depth": 1},
    )


async def test_two_jobs_in_one_store_are_counted_apart_and_add_up(store: Store) -> None:
    await store.write(
        ResultBatch(
            pages=[page(1), page(2, status=404), page(3, error="spider_error: KeyError: 'x'")],
            items=[item(1, 0), item(1, 1), item(2, 0)],
            dead=[dead(10)],
            filtered=[filtered(20)],
            job="docs",
        )
    )
    await store.write(
        ResultBatch(
            pages=[page(4)],
            items=[item(4, 0)],
            dead=[dead(11, reason="timeout"), dead(12)],
            job="blog",
        )
    )
    await store.write(ResultBatch(pages=[page(5)], filtered=[filtered(21)]))  # no job
    docs = StoreCounts(
        pages=3,
        items=3,
        dead=1,
        filtered=1,
        pages_by_status={200: 2, 404: 1},
        dead_by_reason={"http_503": 1},
        filtered_by_reason={"robots_txt": 1},
        spider_errors_by_type={"KeyError": 1},
    )
    blog = StoreCounts(
        pages=1,
        items=1,
        dead=2,
        filtered=0,
        pages_by_status={200: 1},
        dead_by_reason={"http_503": 1, "timeout": 1},
    )
    assert await store.counts(job="docs") == docs
    assert await store.counts(job="blog") == blog
    assert await store.counts(job="other") == StoreCounts(pages=0, items=0, dead=0, filtered=0)
    total = await store.counts()
    # The rows of no job (an embedded crawl, or written before the store knew jobs) count
    # only in the total: one page and one filtered URL here.
    assert (total.pages, total.items, total.dead, total.filtered) == (3 + 1 + 1, 4, 3, 1 + 1)
    assert total.pages_by_status == {200: 4, 404: 1}


async def test_a_url_written_again_by_another_job_counts_for_that_job(store: Store) -> None:
    await store.write(ResultBatch(pages=[page(1), page(2)], items=[item(1, 0)], job="docs"))
    await store.write(ResultBatch(pages=[page(1)], items=[item(1, 0)], job="blog"))
    await store.write(ResultBatch(dead=[dead(2)], job="blog"))  # a page becomes a dead letter
    assert (await store.counts(job="docs")).settled == 0
    blog = await store.counts(job="blog")
    assert (blog.pages, blog.items, blog.dead) == (1, 1, 1)
    assert (await store.counts()).settled == 2


async def test_pages_of_one_job_are_streamed_apart(store: Store) -> None:
    # More than one chunk of each job, interleaved in time: the later chunks keep the job.
    n = 2500
    docs = [page(k, elapsed_s=0.001 * (k % 7)) for k in range(0, n, 2)]
    blog = [page(k) for k in range(1, n, 2)]
    docs_errors = [page(n + 1, error="spider_error: KeyError: 'x'")]
    await store.write(ResultBatch(pages=docs + docs_errors, job="docs"))
    await store.write(ResultBatch(pages=blog, job="blog"))
    await store.write(ResultBatch(pages=[page(n + 2)]))  # no job (an embedded crawl)
    assert await collect(store.pages(job="docs")) == docs + docs_errors
    assert await collect(store.pages(job="blog")) == blog
    assert await collect(store.pages(job="other")) == []
    assert len(await collect(store.pages())) == n + 2
    cut = docs[400].fetched_at
    assert await collect(store.pages(job="docs", since=cut)) == docs[400:] + docs_errors
    assert await collect(store.pages(job="docs", spider_errors_only=True)) == docs_errors
    assert await collect(store.pages(job="blog", spider_errors_only=True)) == []
    assert [p.body for p in await collect(store.pages(job="blog", with_body=True))][:3] == [
        None
    ] * 3
    # A page written again by another job is that job's now.
    await store.write(ResultBatch(pages=[docs[0]], job="blog"))
    assert docs[0] not in await collect(store.pages(job="docs"))
    assert (await collect(store.pages(job="blog")))[0] == docs[0]


def test_a_batch_job_is_a_name_or_none() -> None:
    with pytest.raises(ValueError, match="job"):
        ResultBatch(pages=[page(1)], job="")


async def test_a_batch_of_5000_pages_in_one_write(store: Store) -> None:
    # Many pages share a fetched_at, so chunk boundaries fall inside ties.
    pages = [page(n, fetched_at=1_800_000_000.0 + n // 7) for n in range(5000)]
    items = [item(n, 0) for n in range(0, 5000, 2)]
    await store.write(ResultBatch(pages=list(reversed(pages)), items=items))
    counts = await store.counts()
    assert (counts.pages, counts.items) == (5000, 2500)
    streamed = await collect(store.pages())
    assert streamed == sorted(pages, key=lambda p: (p.fetched_at, p.fingerprint))


async def test_streams_are_ordered_and_complete(store: Store) -> None:
    n_pages = 2100
    pages = [page(n) for n in range(n_pages)]
    items = [
        item(n, i, created_at=1_800_000_000.0 + n % 3) for n in range(n_pages) for i in range(2)
    ]
    deads = [dead(n, at=1_800_000_000.0 + n % 5) for n in range(n_pages, 2 * n_pages)]
    filters = [filtered(n, at=1_800_000_000.0 + n % 2) for n in range(2 * n_pages, 3 * n_pages)]
    await store.write(ResultBatch(pages=pages, items=items, dead=deads, filtered=filters))
    assert await collect(store.items()) == sorted(
        items, key=lambda i: (i.created_at, i.fingerprint, i.index)
    )
    assert await collect(store.dead()) == sorted(deads, key=lambda d: (d.at, d.fingerprint))
    assert await collect(store.filtered()) == sorted(filters, key=lambda f: (f.at, f.fingerprint))


async def test_since_keeps_records_from_that_time_on(store: Store) -> None:
    pages = [page(n) for n in range(10)]
    items = [item(n, 0) for n in range(10)]
    await store.write(ResultBatch(pages=pages, items=items))
    cut = pages[6].fetched_at
    assert await collect(store.pages(since=cut)) == pages[6:]
    assert await collect(store.items(since=cut + 0.5)) == items[7:]
    assert await collect(store.pages(since=cut + 100)) == []


async def test_stopping_a_stream_early_leaves_the_store_usable(store: Store) -> None:
    await store.write(ResultBatch(pages=[page(n) for n in range(2500)]))
    async for _ in store.pages():
        break
    await store.write(ResultBatch(dead=[dead(1)]))
    assert (await store.counts()).pages == 2499


async def test_concurrent_writes_all_land(store: Store) -> None:
    batches = [
        ResultBatch(pages=[page(n)], items=[item(n, 0)]) if n % 2 else ResultBatch(dead=[dead(n)])
        for n in range(40)
    ]
    await asyncio.gather(*(store.write(b) for b in batches))
    counts = await store.counts()
    assert (counts.pages, counts.items, counts.dead) == (20, 20, 20)


def test_items_must_come_with_their_page() -> None:
    with pytest.raises(ValueError, match="no page or dead letter in the batch"):
        ResultBatch(items=[item(1, 0)])


async def test_a_dead_letter_keeps_the_items_written_with_it(store: Store) -> None:
    # an errback's items (crawlq.spider.Failure): owned by the dead letter, as a page's are
    await store.write(ResultBatch(pages=[page(1)], items=[item(1, 0), item(1, 1)]))
    await store.write(ResultBatch(dead=[dead(1)], items=[item(1, 0)]))
    assert [(i.url, i.index) for i in [x async for x in store.items()]] == [
        ("https://example.com/1", 0)
    ]
    await store.write(ResultBatch(dead=[dead(1)]))  # written again without: none
    assert [x async for x in store.items()] == []
    await store.write(ResultBatch(dead=[dead(2)], items=[item(2, 0)]))
    counts = await store.counts()
    assert (counts.pages, counts.items, counts.dead) == (0, 1, 2)


def test_fingerprints_are_20_bytes() -> None:
    with pytest.raises(ValueError, match="20 bytes"):
        ResultBatch(dead=[dead(1, fingerprint=b"short")])


async def test_unserialisable_item_data_writes_nothing(store: Store) -> None:
    for data in ({"when": object()}, {"price": float("nan")}):
        batch = ResultBatch(pages=[page(1)], items=[item(1, 0, data=data)])
        with pytest.raises(ValueError, match=re.escape("https://example.com/1")):
            await store.write(batch)
    assert await store.counts() == StoreCounts(pages=0, items=0, dead=0, filtered=0)


async def test_a_closed_store_refuses_calls(store: Store) -> None:
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await store.write(ResultBatch(pages=[page(1)]))
    with pytest.raises(StoreError, match="closed"):
        await collect(store.pages())


async def test_referrers_round_trip_on_pages_and_dead_letters(store: Store) -> None:
    linked = page(1, referrer="https://example.com/index.html")
    failed = dead(2, referrer="https://example.com/1")
    await store.write(ResultBatch(pages=[linked, page(3)], dead=[failed]))
    assert await collect(store.pages()) == [linked, page(3)]
    assert [p.referrer for p in await collect(store.pages())] == [
        "https://example.com/index.html",
        None,
    ]
    assert await collect(store.dead()) == [failed]


async def test_lookup_tells_each_fingerprint_its_one_outcome(store: Store) -> None:
    archived = page(1, warc_file="crawlq-1.warc.gz", warc_offset=77, referrer="https://e.com/")
    await store.write(
        ResultBatch(
            pages=[archived, page(2)],
            items=[item(1, 0), item(1, 1)],
            dead=[dead(3, referrer="https://example.com/1")],
            filtered=[filtered(4)],
        )
    )
    found = await store.lookup([fp(1), fp(2), fp(3), fp(4), fp(5), fp(1)])
    assert sorted(found) == sorted([fp(1), fp(2), fp(3), fp(4)])  # 5: never stored
    assert found[fp(1)].kind == "page"
    assert found[fp(1)].page == archived  # no body, WARC location and referrer kept
    assert (found[fp(1)].items, found[fp(2)].items) == (2, 0)
    assert found[fp(3)].kind == "dead"
    assert found[fp(3)].dead == dead(3, referrer="https://example.com/1")
    assert found[fp(4)].kind == "filtered"
    assert found[fp(4)].filtered == filtered(4)
    assert await store.lookup([]) == {}
    # a later outcome replaces the earlier one: the page is now a dead letter
    await store.write(ResultBatch(dead=[dead(1)]))
    again = await store.lookup([fp(1)])
    assert again[fp(1)].kind == "dead" and again[fp(1)].items == 0


async def test_lookup_takes_a_bounded_number_of_fingerprints(store: Store) -> None:
    from crawlq.store.contract import LOOKUP_MAX

    with pytest.raises(ValueError, match=f"at most {LOOKUP_MAX}"):
        await store.lookup([fp(n) for n in range(LOOKUP_MAX + 1)])
