"""How the CLI shows a crawl's state and end: rich tables, and the end-of-crawl summary.

Tables: the live progress display (`ProgressDisplay`), ``status``, ``inspect`` and ``dead
list``. rich is imported inside each function, so importing this module costs nothing.
Crawled text (titles, URLs) is never read as rich markup (`_cell`).

The summary (`print_summary`: plain ``key: value`` lines) and the spider-errors warning both
read a `crawlq.engine.CrawlReport`; counts by reason or kind are written largest first.
Exit statuses: `EXIT_SPIDER_ERRORS` (3), which ``--fail-on-spider-errors`` turns spider
errors into, and `EXIT_NOTHING_STORED` (4) for a crawl whose every seed failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from crawlq.engine import CrawlReport, Progress

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "EXIT_NOTHING_STORED",
    "EXIT_SPIDER_ERRORS",
    "ProgressDisplay",
    "dead_table",
    "kinds",
    "nothing_stored_line",
    "print_summary",
    "spider_errors_warning",
    "status_table",
    "story_table",
]


class ProgressDisplay:
    """A live table on the terminal (stderr), refreshed by `update`."""

    def __init__(self, console: Console) -> None:
        from rich.live import Live

        self._live = Live(console=console, auto_refresh=False, transient=True)

    def __enter__(self) -> ProgressDisplay:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)

    def update(self, p: Progress) -> None:
        """Redraw with a new snapshot."""
        from rich.table import Table

        f, c = p.frontier, p.counters
        table = Table.grid(padding=(0, 2))
        for _ in range(8):
            table.add_column(justify="right")
        table.add_row(
            "pages",
            "queued",
            "in flight",
            "retrying",
            "errors",
            "spider errors",
            "pages/s",
            "elapsed",
        )
        table.add_row(
            str(c.pages),
            str(f.queued),
            str(f.in_flight),
            str(f.delayed),
            str(sum(c.dead.values())),
            _spider_cell(c.spider_errors),
            f"{p.pages_per_s:.1f}",
            f"{p.elapsed_s:.0f}s",
        )
        self._live.update(table, refresh=True)


def _spider_cell(counts: Mapping[str, int]) -> str:
    """The live display's spider-error cell: the total, and the commonest kind."""
    if not counts:
        return "0"
    top, n = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    more = ", …" if len(counts) > 1 else ""
    return f"{sum(counts.values())} ({top} {n}{more})"


def _stored_cell(stored: int | None, total: int | None) -> str:
    """The job's stored pages, and the whole store's when other jobs wrote there too."""
    if stored is None:
        return "?"
    if total is None or total == stored:
        return str(stored)
    return f"{stored} (of {total} in the store)"


def _iso_ms(at_ms: Any) -> str:
    """A Unix-ms time as ISO 8601 UTC (``?`` when it is not a number)."""
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(int(at_ms) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def status_table(report: Mapping[str, Any]) -> Table:
    """The ``crawlq status`` report as a table (see `crawlq.cli.status`)."""
    from rich.table import Table

    celery = report.get("engine") == "celery"
    title = f"job {report['job']}" + (" (Celery engine)" if celery else "")
    if report.get("paused"):
        title += " (paused: crawlq job resume)"
    table = Table(title=title, show_header=False, box=None)
    table.add_column(justify="right", style="bold")
    table.add_column()
    rate = report.get("pages_per_s")
    stored = report.get("stored")
    if celery:  # URLs wait in the broker, not in Redis: one number for queued and running
        rows: tuple[tuple[str, Any], ...] = (("pending (queued or running)", report["pending"]),)
    else:
        rows = (("queued", report["queued"]), ("in flight", report["in_flight"]))
    for name, value in (
        *rows,
        ("delayed (retries)", report["delayed"]),
        ("dead", report["dead"]),
        ("seen", report["seen"]),
        ("done", report["done"]),
        ("over max_pages_per_host", report.get("over_budget", 0)),
        ("stored pages", _stored_cell(stored, report.get("stored_total"))),
        ("pages/s (last minute)", "?" if rate is None else f"{rate:.1f}"),
        ("live workers", "? (celery inspect ping)" if celery else len(report.get("workers", []))),
    ):
        table.add_row(name, str(value))
    for r in (report.get("refusals") or [])[:10]:
        table.add_row(
            _cell(f"refused by {r['worker']}"), _cell(f"{_iso_ms(r['at_ms'])}: {r['reason']}")
        )
    for host in (report.get("hosts") or [])[:10]:
        table.add_row(host["host"], f"{host['queued']} queued, {host['in_flight']} in flight")
    for b in (report.get("backoff") or [])[:10]:
        what = "down (its URLs are dead-lettered)" if b["state"] == "down" else b["state"]
        table.add_row(
            b["host"],
            f"{what} until {b['until']}: {b['pushbacks']} 429/503, "
            f"{b['failures']} connection failures in a row",
        )
    return table


_STATE_WORDS = {
    "queued": "queued",
    "in_flight": "in flight",
    "delayed": "delayed (waiting for a retry)",
    "pending": "pending (Celery engine: admitted, not settled)",
    "stored": "stored",
    "dead": "dead-lettered",
    "filtered": "filtered (never requested)",
    "done": "done (acked; no record in this store)",
    "never_seen": "never seen",
}


def _cell(value: Any) -> Any:
    """A value as table text: markup-free, ``-`` for none.

    Crawled data (a title, a URL) could hold ``[bold]``: it is never read as rich markup.
    """
    from rich.text import Text

    return Text("-" if value is None or value == "" else str(value))


def story_table(story: Mapping[str, Any]) -> Table:
    """``crawlq inspect``'s story as a table (see `crawlq.ops.story`)."""
    from rich.table import Table

    state = str(story["state"])
    table = Table(title=f"{story['url']}", show_header=False, box=None, title_justify="left")
    table.add_column(justify="right", style="bold")
    table.add_column()
    table.add_row("state", _cell(_STATE_WORDS.get(state, state)))
    table.add_row("canonical URL", _cell(story["canonical_url"]))
    table.add_row("fingerprint", _cell(story["fingerprint"]))
    if story.get("engine") == "celery":
        table.add_row("engine", _cell("celery"))
    for name, value in (story.get("details") or {}).items():
        table.add_row(name.replace("_", " "), _cell(value))
    shown = set(story.get("details") or {})
    for name, value in (story.get("request") or {}).items():
        if name not in shown and not (name == "method" and value == "GET"):
            table.add_row(name, _cell(value))
    stored = story.get("stored")
    if stored and state not in ("stored", "dead", "filtered"):
        summary = ", ".join(f"{k} {v}" for k, v in stored.items() if v not in (None, ""))
        table.add_row("in the store", _cell(summary))
    for note in story.get("notes") or ():
        table.add_row("note", _cell(note))
    return table


def dead_table(rows: list[Mapping[str, Any]]) -> Table:
    """``crawlq dead list`` as a table (rows of `crawlq.ops.dead.DeadRow.to_json`)."""
    from rich.table import Table

    table = Table(title=f"{len(rows)} dead letter{'' if len(rows) == 1 else 's'}")
    for name in ("url", "reason", "attempts", "at", "referrer", "detail"):
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(
            *(
                _cell(row.get(name))
                for name in ("url", "reason", "attempts", "at", "referrer", "detail")
            )
        )
    return table


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


def spider_errors_warning(report: CrawlReport, *, replayable: int) -> str | None:
    """The warning line for a crawl whose store holds pages the spider failed on, or None.

    Args:
        report: How the crawl ended (``report.store`` counts the spider errors by kind).
        replayable: How many of those pages kept a body or a WARC record, so that ``crawlq
            reparse`` can rerun the fixed spider on them without fetching them again (the
            store's, whichever run wrote them: ``replayable`` of ``crawlq export --what
            errors``).
    """
    s = report.store
    if not s.spider_errors:
        return None
    pages = "page has" if s.spider_errors == 1 else "pages have"
    rerun = "after fixing the spider, `crawlq reparse --errors-only` reruns it on the kept bodies"
    without = s.spider_errors - min(replayable, s.spider_errors)
    keep = "crawl with --store-body or --warc to make them replayable by `crawlq reparse`"
    if without == 0:
        then = rerun
    elif without == s.spider_errors:
        then = f"they were stored without bodies ({keep})"
    else:
        then = f"{rerun}; {without} of them were stored without bodies ({keep})"
    return (
        f"crawlq: warning: {s.spider_errors} {pages} spider errors "
        f"({kinds(s.spider_errors_by_type)}): `crawlq export --what errors` lists them; {then}"
    )
