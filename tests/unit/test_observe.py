"""Log shapes and metric bookkeeping, without a crawl: JSON lines, worker metrics, gauges."""

from __future__ import annotations

import json
import logging
from collections import Counter

from prometheus_client import CollectorRegistry, generate_latest

from crawlq.cli.terminal import JsonFormatter
from crawlq.dashboard.history import JobWatch
from crawlq.dashboard.render import panel, sparkline
from crawlq.engine.metrics import FrontierCollector, WorkerMetrics, status_class
from crawlq.engine.outcome import Kind, Outcome
from crawlq.records import DeadRecord, FilteredRecord, PageRecord
from crawlq.request import CrawlRequest, Lease


def _lease(url: str) -> Lease:
    return Lease("1", CrawlRequest(url), 1, "w", 0)


def _page(url: str, status: int, size: int, error: str | None = None) -> PageRecord:
    req = CrawlRequest(url)
    return PageRecord(
        fingerprint=req.fingerprint, url=url, final_url=url, status=status,
        content_type="text/html", depth=0, title=None, fetched_at=0.0, size_bytes=size,
        elapsed_s=0.2, attempt=1,
        error=error, spider="s",
    )  # fmt: skip


def test_json_formatter_writes_one_object_with_fields_and_no_password() -> None:
    record = logging.LogRecord("crawlq.x", logging.INFO, __file__, 1, "to %s", ("x",), None)
    record.crawlq = {"url": "redis://:hunter2@h:6379/0", "status": 200}
    line = JsonFormatter().format(record)
    assert "\n" not in line and "hunter2" not in line
    data = json.loads(line)
    assert data["message"] == "to x" and data["status"] == 200 and data["logger"] == "crawlq.x"
    assert data["level"] == "INFO" and data["time"].endswith("Z")


def test_worker_metrics_count_each_outcome_once() -> None:
    registry = CollectorRegistry()
    m = WorkerMetrics(registry)
    ok = Outcome(_lease("http://a.test/1"), Kind.PAGE, page=_page("http://a.test/1", 200, 10))
    ok.skipped = Counter({"offsite": 2})
    bad = Outcome(
        _lease("http://a.test/2"),
        Kind.PAGE,
        page=_page("http://a.test/2", 404, 5, "spider_error: boom"),
    )
    req = CrawlRequest("http://a.test/3")
    dead = Outcome(
        _lease(req.url),
        Kind.DEAD,
        dead=DeadRecord(req.fingerprint, req.url, "timeout", "t", 1, 0, 0.0),
        reason="timeout",
    )
    filt = Outcome(
        _lease(req.url),
        Kind.FILTERED,
        filtered=FilteredRecord(req.fingerprint, req.url, "robots_txt", 0, 0.0),
        reason="robots_txt",
    )
    for o in (ok, bad, dead, filt):
        m.settled(o)
    m.retried("http_503")
    value = registry.get_sample_value
    assert value("crawlq_pages_total", {"status_class": "2xx"}) == 1
    assert value("crawlq_pages_total", {"status_class": "4xx"}) == 1
    assert value("crawlq_response_bytes_total") == 15
    assert value("crawlq_fetch_duration_seconds_count") == 2
    assert value("crawlq_spider_errors_total") == 1
    assert value("crawlq_dead_letters_total", {"reason": "timeout"}) == 1
    assert value("crawlq_filtered_total", {"reason": "robots_txt"}) == 1
    assert value("crawlq_links_not_followed_total", {"reason": "offsite"}) == 2
    assert value("crawlq_retries_total", {"reason": "http_503"}) == 1
    assert [status_class(s) for s in (200, 301, 503, 99)] == ["2xx", "3xx", "5xx", "other"]


def test_frontier_collector_serves_the_report_and_marks_failed_reads() -> None:
    registry = CollectorRegistry()
    collector = FrontierCollector("docs")
    registry.register(collector)
    assert registry.get_sample_value("crawlq_status_up", {"crawlq_job": "docs"}) == 0
    report = {
        "queued": 7, "in_flight": 2, "delayed": 1, "dead": 3, "seen": 20, "done": 7,
        "pages_per_s": 1.5, "stored": 7, "pending": None, "retries": 4,
        "workers": [{"id": "w", "last_seen_s": 1.0}],
        "hosts": [{"host": "a.test", "queued": 7, "in_flight": 2}],
        "backoff": [{"host": "b.test", "state": "parked"}],
    }  # fmt: skip
    collector.update(report)
    v = registry.get_sample_value
    assert v("crawlq_status_up", {"crawlq_job": "docs"}) == 1
    assert v("crawlq_frontier_queued", {"crawlq_job": "docs"}) == 7
    assert v("crawlq_frontier_pages_per_second", {"crawlq_job": "docs"}) == 1.5
    assert v("crawlq_frontier_pending", {"crawlq_job": "docs"}) is None
    assert v("crawlq_frontier_live_workers", {"crawlq_job": "docs"}) == 1
    assert v("crawlq_frontier_host_queued", {"crawlq_job": "docs", "host": "a.test"}) == 7
    assert v("crawlq_frontier_hosts_in_backoff", {"crawlq_job": "docs", "state": "parked"}) == 1
    collector.update(None)  # a failed read keeps the last numbers, says so
    assert v("crawlq_status_up", {"crawlq_job": "docs"}) == 0
    assert b"crawlq_frontier_queued" in generate_latest(registry)


def test_dashboard_escapes_what_comes_from_shared_state() -> None:
    watch = JobWatch("redis://127.0.0.1:6379/9", "j")
    watch.observe(
        {
            "queued": 1, "in_flight": 0, "delayed": 0, "dead": 0, "seen": 1, "done": 0,
            "stored": 0, "retries": 0, "pages_per_s": 0.0, "engine": "native", "pending": None,
            "workers": [{"id": "<script>alert(1)</script>", "last_seen_s": 0.1}],
            "hosts": [{"host": "<img src=x onerror=alert(1)>", "queued": 1, "in_flight": 0}],
            "backoff": [],
        }
    )  # fmt: skip
    html = panel([watch])
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html
    assert sparkline([1.0, None, 3.0]).startswith("<svg")
