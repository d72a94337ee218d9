"""The end-of-crawl summary (plain ``key: value`` lines) and the spider-errors warning.

Both read a `crawlq.engine.CrawlReport`; counts by reason or kind are written largest first.
`EXIT_SPIDER_ERRORS` (3) is the exit status that ``--fail-on-spider-errors`` turns them into.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO

from crawlq.engine import CrawlReport

__all__ = [
    "EXIT_NOTHING_STORED",
    "EXIT_SPIDER_ERRORS",
    "kinds",
    "nothing_stored_line",
    "print_summary",
    "spider_errors_warning",
]

EXIT_SPIDER_ERRORS = 3
"""Exit status of ``crawl`` (and ``reparse``) with ``--fail-on-spider-errors`` when the store
holds pages whose spider callback failed. Without the flag such a crawl exits 0 with a
warning line (`spider_errors_warning`)."""

EXIT_NOTHING_STORED = 4
"""Exit status of ``crawl`` when it ran to its end and stored no page because every URL it
tried failed (dead-lettered or filtered): a crawl whose only seed is down is not a success
(`nothing_stored_line` says why)."""


def kinds(counts: Mapping[str, int]) -> str:
    """``KeyError 2, TypeError 1``: counts by name, the largest first (then by name)."""
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))


def _reasons(counts: Mapping[str, int]) -> str:
    if not counts:
        return "0"
    parts = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items(), key=lambda x: -x[1]))
    return f"{sum(counts.values())} ({parts})"


def _job_pages(report: CrawlReport) -> str:
    """``N by this job, `` when other jobs' pages share the store, else nothing."""
    n = report.job_pages
    return "" if n is None or n == report.store.pages else f"{n} by this job, "


def _settled_lines(report: CrawlReport) -> list[str]:
    """The dead-letter and filtered lines.

    An embedded crawl's store is the crawl: its totals, by reason. A shared job's run gives
    this run's count (when every worker process reported it) and the job's totals by reason,
    labelled as the job's: ``dead-lettered: 1 this run, 3 by this job (timeout 3)``.
    """
    c, job = report.counters, report.job_store
    if job is None:
        dead = _reasons(report.store.dead_by_reason)
        filtered = _reasons(report.store.filtered_by_reason)
    else:
        run = report.full_counters
        dead = _run_and_job(sum(c.dead.values()) if run else None, job.dead_by_reason)
        filtered = _run_and_job(sum(c.filtered.values()) if run else None, job.filtered_by_reason)
    held = report.store.dead if job is None else job.dead
    return [
        f"dead-lettered: {dead}" + ("; --retry-dead requeues them" if held else ""),
        f"filtered: {filtered}",
    ]


def _run_and_job(this_run: int | None, by_reason: Mapping[str, int]) -> str:
    """``2 this run, 5 by this job (timeout 3, http_404 2)``; without ``this_run`` when None."""
    run = "" if this_run is None else f"{this_run} this run, "
    parts = ", ".join(f"{r} {n}" for r, n in sorted(by_reason.items(), key=lambda x: -x[1]))
    return f"{run}{sum(by_reason.values())} by this job" + (f" ({parts})" if parts else "")


def print_summary(report: CrawlReport, out: TextIO, *, worker: bool = False) -> None:
    """Write the end-of-crawl summary as plain ``key: value`` lines.

    ``worker``: the report of ``crawlq worker``, for which a stop is the normal end (the job
    goes on with its other workers), not an interruption. The stored pages are this run's,
    the job's when other jobs write to the same store (``12 by this job``), and the store's;
    on a shared job, dead letters and filtered URLs are this run's and the job's
    (`_settled_lines`), and the links not followed, retries and round trips this run's.
    """
    c, s = report.counters, report.store
    rate = c.pages / report.elapsed_s if report.elapsed_s > 0 else 0.0
    ended = {
        "done": "crawl finished: nothing left to crawl"
        if nothing_stored_line(report) is None
        else "crawl failed: no page stored",
        "max_pages": "crawl stopped at --max-pages",
        "stopped": "crawl interrupted: re-run the same command to resume",
    }.get(report.stopped_by, report.stopped_by)
    if worker:
        pending = report.frontier.pending
        left = (
            "the job has nothing left to crawl"
            if pending == 0
            else f"{pending} URLs left in the job (queued, retrying or in flight)"
        )
        ended = {
            "done": f"worker finished: {left}",
            "max_pages": f"worker stopped at --max-pages: {left}",
            "stopped": f"worker stopped: {left}",
        }.get(report.stopped_by, report.stopped_by)
    lines = [
        ended,
        f"pages stored: {c.pages} this run, {_job_pages(report)}{s.pages} in store",
        f"items: {c.items} this run, {s.items} in store"
        if report.full_counters
        else f"items: {s.items} in store",
        *_settled_lines(report),
    ]
    if report.replayed:
        lines.append(f"dead letters replayed first (--retry-dead): {report.replayed}")
    if s.spider_errors or c.spider_errors:
        this_run = f"{sum(c.spider_errors.values())} this run, " if report.full_counters else ""
        lines.append(
            f"spider errors: {this_run}{s.spider_errors} in store"
            + (f" ({kinds(s.spider_errors_by_type)})" if s.spider_errors else "")
        )
    if report.full_counters and c.dropped:  # validation, pipelines, item dedup
        lines.append(f"items dropped: {_reasons(c.dropped)}")
    if report.full_counters:  # else a worker process ended without its counts
        run = "" if report.job_store is None else " this run"  # the job's are elsewhere
        skipped = _reasons(c.skipped).replace(" (", f"{run} (", 1) if c.skipped else f"0{run}"
        lines += [f"links not followed: {skipped}", f"retries: {c.retries}{run}"]
        if report.round_trips:
            lines.append(
                f"frontier round trips: {c.round_trips}{run}"
                + (f" ({c.round_trips / c.pages:.2f} per page)" if c.pages else "")
            )
    if report.frontier.over_budget:
        lines.append(
            f"over max_pages_per_host: {report.frontier.over_budget} links not queued "
            "(their host had its budget of URLs)"
        )
    if report.frontier.frontier_full:
        lines.append(
            f"links not followed: {report.frontier.frontier_full} by this job "
            f"(frontier_full {report.frontier.frontier_full}): Redis was full (at its maxmemory)"
        )
    f = report.frontier
    lines += [
        f"queued: {f.queued}, delayed: {f.delayed}, in flight: {f.in_flight}"
        + ("" if report.job_store is None else " (the job's, all its workers)"),
        f"elapsed: {report.elapsed_s:.1f}s, {rate:.1f} pages/s",
    ]
    out.write("\n".join(lines) + "\n")


def nothing_stored_line(report: CrawlReport) -> str | None:
    """The error line of a crawl that finished with no page stored because every seed failed.

    None unless the crawl ran to its end (``done``), the store holds no page of this crawl
    (the job's pages for a shared job), and it holds dead letters or filtered URLs: with no
    page stored, no link was found, so those are the seeds' (and their redirects'). A
    re-run of a crawl that stored pages before is not one.
    """
    s = report.store
    stored = s.pages if report.job_pages is None else report.job_pages
    if report.stopped_by != "done" or stored or not (s.dead or s.filtered):
        return None
    why = [f"dead-lettered {_reasons(s.dead_by_reason)}"] if s.dead else []
    why += [f"filtered {_reasons(s.filtered_by_reason)}"] if s.filtered else []
    listed = "; `crawlq dead list` shows why each failed" if s.dead else ""
    return f"crawlq: error: no page stored, every seed failed: {', '.join(why)}{listed}"


def spider_errors_warning(report: CrawlReport, *, replayable: bool) -> str | None:
    """The warning line for a crawl whose store holds pages the spider failed on, or None.

    Args:
        report: How the crawl ended (``report.store`` counts the spider errors by kind).
        replayable: The crawl kept bodies (``--store-body``) or WARC records, so ``crawlq
            reparse`` can rerun the fixed spider without fetching the pages again.
    """
    s = report.store
    if not s.spider_errors:
        return None
    pages = "page has" if s.spider_errors == 1 else "pages have"
    then = (
        "after fixing the spider, `crawlq reparse --errors-only` reruns it on the kept bodies"
        if replayable
        else "they were stored without bodies (crawl with --store-body or --warc to make them "
        "replayable by `crawlq reparse`)"
    )
    return (
        f"crawlq: warning: {s.spider_errors} {pages} spider errors "
        f"({kinds(s.spider_errors_by_type)}): `crawlq export --what errors` lists them; {then}"
    )
