"""The dashboard's store-side panels are the job's own; its fetch-time means are real.

Two jobs write into one real SQLite store (and a crawl of no job too); a `JobWatch` of each
reads it as the dashboard's sampler does (`JobWatch.read_store`) and the panel shows only
that job's dead letters and hosts, with the mean fetch time of its pages in milliseconds.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from parsel import Selector

from crawlq.dashboard.history import JobWatch
from crawlq.dashboard.render import panel
from crawlq.records import DeadRecord, PageRecord
from crawlq.store import ResultBatch
from crawlq.store.sqlite import SqliteStore


def page(url: str, elapsed_s: float, ago_s: float = 5.0) -> PageRecord:
    """A page fetched ``ago_s`` before now (the watch reads the last minutes: not import time)."""
    return PageRecord(
        fingerprint=hashlib.sha1(url.encode()).digest(), url=url, final_url=url, status=200,
        content_type="text/html", depth=0, title=None, size_bytes=10,
        fetched_at=time.time() - ago_s,  # now, not import time: the watch reads recent pages
        elapsed_s=elapsed_s, attempt=1, error=None, spider="s",
    )  # fmt: skip


def dead(url: str, reason: str) -> DeadRecord:
    fp = hashlib.sha1(url.encode()).digest()
    return DeadRecord(fp, url, reason, "detail", 1, 0, time.time() - 5)


REPORT = {
    "queued": 0, "in_flight": 0, "delayed": 0, "dead": 0, "seen": 3, "done": 3, "stored": 3,
    "retries": 0, "pages_per_s": 0.0, "engine": "native", "pending": None, "workers": [],
    "hosts": [], "backoff": [], "paused": False,
}  # fmt: skip


async def shared_store(path: Path) -> None:
    store = await SqliteStore.open(path)
    try:
        # 1, 2 and 6 ms: loopback fetches, which hundredths of a second round to 0.00
        docs = [page(f"http://docs.test/{i}", s) for i, s in enumerate((0.001, 0.002, 0.006))]
        await store.write(ResultBatch(pages=docs, job="docs"))
        blog = [page(f"http://blog.test/{i}", 0.2) for i in range(4)]
        await store.write(
            ResultBatch(pages=blog, dead=[dead("http://blog.test/x", "http_503")], job="blog")
        )
        await store.write(
            ResultBatch(
                pages=[page(f"http://none.test/{i}", 0.5) for i in range(3)],
                dead=[dead("http://none.test/x", "timeout")],
            )
        )  # an embedded crawl: no job
    finally:
        await store.close()


async def watched(path: Path, job: str) -> Selector:
    watch = JobWatch("redis://127.0.0.1:6379/9", job, str(path))
    try:
        watch.observe({**REPORT, "job": job})
        await watch.read_store()
        return Selector(text=panel([watch]))
    finally:
        await watch.close()


def rows(section: Selector, table: str) -> list[list[str]]:
    return [tr.css("td::text").getall() for tr in section.css(f"table.{table} tbody tr")]


async def test_each_job_sees_only_its_own_dead_letters_and_hosts(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    await shared_store(path)
    docs = await watched(path, "docs")
    assert rows(docs, "dead-reasons") == [["none"]]
    assert rows(docs, "slowest") == [["docs.test", "3.0", "3"]]  # (1 + 2 + 6) / 3 ms
    blog = await watched(path, "blog")
    assert rows(blog, "dead-reasons") == [["http_503", "1"]]
    assert rows(blog, "slowest") == [["blog.test", "200.0", "4"]]


async def test_pages_read_once_each_across_samples(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    await shared_store(path)
    watch = JobWatch("redis://127.0.0.1:6379/9", "blog", str(path))
    try:
        await watch.read_store()
        await watch.read_store()  # nothing new: the mean and the count stay
        store = await SqliteStore.open(path)
        try:
            await store.write(ResultBatch(pages=[page("http://blog.test/9", 0.7, 1.0)], job="blog"))
        finally:
            await store.close()
        await watch.read_store()
    finally:
        await watch.close()
    [host] = watch.slowest()
    assert (host.host, host.pages) == ("blog.test", 5)
    assert round(host.mean_ms, 6) == round((4 * 200 + 700) / 5, 6)


async def test_a_paused_job_says_so_above_the_sections_and_on_its_own() -> None:
    watches = []
    for job, paused in (("docs", True), ("blog", False)):
        watch = JobWatch("redis://127.0.0.1:6379/9", job)
        watch.observe({**REPORT, "job": job, "paused": paused})
        watches.append(watch)
    html = Selector(text=panel(watches))
    notices = html.css("p.notice.paused")
    assert [n.attrib["data-job"] for n in notices] == ["docs"]
    assert "crawlq job resume docs" in notices[0].xpath("string()").get("")
    assert html.css('section[data-job="docs"] h2 .paused::text').get() == "paused"
    assert html.css('section[data-job="blog"] h2 .paused') == []
    # the notices come before every section
    assert html.xpath("/html/body/*[1]").attrib.get("class") == "notice paused"
