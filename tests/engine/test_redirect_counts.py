"""Redirect loops: what a crawl counts (summary, Prometheus) equals what its store holds.

A page that redirects to itself forever (``/self-redirect/x?forever=1``) and two pages that
redirect to each other (``/redirect-loop/a`` <-> ``/b``) are fetched again once per URL of
the chain (revisits), then end as ``redirect_loop`` dead letters. A revisit's record, page or
dead letter, replaces the one its URL had (one record per URL), so the redirect that queued
a revisit is a hop, not a page (`crawlq.engine.outcome.Outcome.revisit`): the counts of the
run's summary (`crawlq.engine.outcome.WorkerCounters`) and of the worker metrics equal the
store's, kind by kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from crawlq.engine import metrics
from crawlq.engine.metrics import WorkerMetrics
from crawlq.testing import RequestLog

from .conftest import assert_nothing_lost, crawl


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerMetrics]:
    """This process's worker metrics, on a registry of the test's own."""
    m = WorkerMetrics(CollectorRegistry())
    monkeypatch.setattr(metrics, "_recorder", m)
    yield m


def _by_label(counter: Any) -> dict[str, int]:
    """``{label value: count}`` of a labelled counter, zeros left out."""
    out: dict[str, int] = {}
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.value:
                (value,) = sample.labels.values()
                out[value] = int(sample.value)
    return out


def _total(metric: Any, suffix: str = "_total") -> int:
    """The sum of a metric's samples named ``*suffix`` (``_count``: a histogram's count)."""
    return sum(int(s.value) for f in metric.collect() for s in f.samples if s.name.endswith(suffix))


async def test_redirect_loops_count_what_the_store_holds(
    db: Path,
    base: str,
    log: RequestLog,
    frontier: dict[str, Any],
    recorded: WorkerMetrics,
) -> None:
    self_loop = f"{base}/self-redirect/x?forever=1"
    a, b = f"{base}/redirect-loop/a", f"{base}/redirect-loop/b"
    r = await crawl(db, [self_loop, a], **frontier)
    assert_nothing_lost(r, [self_loop, a, b])
    assert (log.count("/self-redirect/x"), log.count("/redirect-loop/a")) == (2, 2)
    assert log.count("/redirect-loop/b") == 2
    # the store: a's 302 (its revisit's record), the two loops' dead letters
    assert r.counts.pages_by_status == {302: 1}
    assert r.counts.dead_by_reason == {"redirect_loop": 2}
    assert set(r.dead) == {self_loop, b}
    # the run's summary counts the same
    assert (r.report.counters.pages, r.report.store.pages) == (1, 1)
    assert r.report.counters.dead == {"redirect_loop": 2}
    # and so do the worker metrics, kind by kind
    assert _by_label(recorded.pages) == {"3xx": 1}
    assert _by_label(recorded.dead_letters) == {"redirect_loop": 2}
    assert _total(recorded.fetch_duration, "_count") == 1  # one page's fetch
    assert _total(recorded.cookie_wall_hops) == 3  # self once, b once, a's revisit once
    assert Counter(p.status for p in r.page_list) == Counter({302: 1})
