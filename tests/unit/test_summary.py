"""The end-of-run summary's stored pages: this run's, the job's (when it shares the store)."""

from __future__ import annotations

import dataclasses
import io

from crawlq.cli.reports import print_summary
from crawlq.engine import CrawlReport
from crawlq.engine.outcome import WorkerCounters
from crawlq.frontier import FrontierStats
from crawlq.store import StoreCounts

_REPORT = CrawlReport(
    stopped_by="done",
    counters=WorkerCounters(pages=3),
    store=StoreCounts(pages=40, items=0, dead=0, filtered=0),
    frontier=FrontierStats(0, 0, 0, 0, 0, 0),
    elapsed_s=1.0,
    seeded=1,
)


def _stored_line(report: CrawlReport) -> str:
    out = io.StringIO()
    print_summary(report, out)
    [line] = [ln for ln in out.getvalue().splitlines() if ln.startswith("pages stored:")]
    return line


def test_a_job_sharing_its_store_says_its_own_count_too() -> None:
    shared = dataclasses.replace(_REPORT, job_pages=12)
    assert _stored_line(shared) == "pages stored: 3 this run, 12 by this job, 40 in store"


def test_a_store_of_one_crawl_gives_one_count() -> None:
    assert _stored_line(_REPORT) == "pages stored: 3 this run, 40 in store"  # embedded
    alone = dataclasses.replace(_REPORT, job_pages=40)
    assert _stored_line(alone) == "pages stored: 3 this run, 40 in store"
