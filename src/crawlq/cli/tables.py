"""Rich tables: the live progress display, ``status``, ``inspect`` and ``dead list``.

rich is imported inside each function, so importing this module costs nothing. Crawled text
(titles, URLs) is never read as rich markup (`_cell`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crawlq.engine import Progress

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["ProgressDisplay", "dead_table", "status_table", "story_table"]


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
    """The ``crawlq status`` report as a table (see `crawlq.cli.status_cmd`)."""
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
