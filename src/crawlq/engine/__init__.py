"""The engines' shared loop: `process` one lease, the native `Worker`, and whole-`Crawl` runs."""

from __future__ import annotations

from crawlq.engine.crawl import Crawl, CrawlReport, Progress
from crawlq.engine.deps import Deps
from crawlq.engine.outcome import Kind, Outcome, WorkerCounters
from crawlq.engine.step import process
from crawlq.engine.worker import Worker

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
