"""The engines' shared loop: `process` one lease, the native `Worker`, and whole-`Crawl` runs."""

from __future__ import annotations

from crawlq.engine.crawl import Crawl, CrawlReport, Progress
from crawlq.engine.step import Deps, Kind, Outcome, process
from crawlq.engine.worker import Worker, WorkerCounters

__all__ = [
    "Crawl",
    "CrawlReport",
    "Deps",
    "Kind",
    "Outcome",
    "Progress",
    "Worker",
    "WorkerCounters",
    "process",
]
