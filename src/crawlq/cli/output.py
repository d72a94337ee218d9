"""Terminal output for the CLI: logging setup, the live progress display, the summary.

The only module that imports rich, and only when there is a terminal to draw on (or a
status table to print): a crawl whose stderr is a file or a pipe starts without it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from crawlq.engine import CrawlReport, Progress
from crawlq.secrecy import redact

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_SPIDER_ERRORS",
    "PROGRESS_LOGGER",
    "JsonFormatter",
    "ProgressDisplay",
    "RedactingFormatter",
    "configure_logging",
    "dead_table",
    "exit_on_broken_pipe",
    "kinds",
    "print_summary",
    "spider_errors_warning",
    "status_table",
    "stderr_console",
    "stdout_console",
    "story_table",
    "terminal_console",
]

_LEVELS = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}

PROGRESS_LOGGER = "crawlq.progress"
"""The logger of the periodic progress lines (`crawlq.cli.running`): at INFO, shown unless
``-q`` even when the other INFO lines are not (``-v``)."""

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""Exit status (141) of a command whose standard output was closed by its reader (``| head``):
what a shell reports for a standard tool stopped by SIGPIPE, so ``set -o pipefail`` scripts
treat crawlq like ``cat`` or ``grep``, and distinct from 0 (all written) and 1 (an error)."""


EXIT_SPIDER_ERRORS = 3
"""Exit status of ``crawl`` (and ``reparse``) with ``--fail-on-spider-errors`` when the store
holds pages whose spider callback failed. Without the flag such a crawl exits 0 with a
warning line (`spider_errors_warning`)."""


def exit_on_broken_pipe() -> NoReturn:
    """End the process quietly because the reader of standard output has gone away.

    Follows the "Note on SIGPIPE" of Python's `signal` docs: standard output is pointed at
    /dev/null so that the interpreter's final flush cannot fail again (and print a second
    error), then the process exits with `EXIT_BROKEN_PIPE`. Nothing is written to stderr.

    Raises:
        SystemExit: Always, with `EXIT_BROKEN_PIPE`.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    sys.exit(EXIT_BROKEN_PIPE)


def stderr_console() -> Console:
    """A rich console on stderr."""
    from rich.console import Console

    return Console(stderr=True)


def stdout_console() -> Console:
    """A rich console on stdout, for a command whose output is a table (``crawlq status``).

    When the reader of stdout goes away (``crawlq status --watch | head``), the command ends
    quietly with `EXIT_BROKEN_PIPE`, like ``crawlq export`` (rich's own default is exit 1).
    """
    from rich.console import Console

    class _StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            exit_on_broken_pipe()

    return _StdoutConsole()


def terminal_console() -> Console | None:
    """The console that progress and logs share when stderr is a terminal, else None."""
    return stderr_console() if sys.stderr.isatty() else None


class RedactingFormatter(logging.Formatter):
    """A formatter whose lines (tracebacks included) never show a password (`redact`)."""

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record, passwords redacted."""
        return redact(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, for log pipelines (``--log-format json``).

    Keys: ``time`` (ISO 8601 UTC, milliseconds), ``level``, ``logger``, ``message``, then the
    record's structured fields when it has them (``extra={"crawlq": {...}}``: a fetch line's
    ``method``, ``url``, ``status``, ``bytes``, ``seconds``, ``attempt``; a progress line's
    ``pages``, ``pages_per_s``, ``queued``, ``in_flight``, ``delayed``, ``errors``), and
    ``exception`` with the traceback. Passwords are redacted as in text lines (`redact`).
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, object] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "crawlq", None)
        if isinstance(fields, dict):
            out.update({k: v for k, v in fields.items() if k not in out})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(out, ensure_ascii=False, default=str))


def configure_logging(verbosity: int, console: Console | None, fmt: str = "text") -> None:
    """Send crawlq's log records to stderr at a level chosen by ``verbosity``.

    -1 (quiet): errors only; 0: warnings (and progress lines); 1: one line per fetched URL;
    2 or more: debug. Through ``console`` (rich) on a terminal; as plain timestamped lines
    when it is None; as JSON lines (`JsonFormatter`) with ``fmt`` ``json``, terminal or not.
    """
    level = _LEVELS.get(verbosity, logging.DEBUG)
    if fmt == "json":
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
    elif console is not None and console.is_terminal:
        from rich.logging import RichHandler

        handler = RichHandler(console=console, show_path=False, rich_tracebacks=False, markup=False)
        handler.setFormatter(RedactingFormatter("%(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("crawlq")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    # Progress lines are INFO records shown at the default verbosity too (not with -q).
    logging.getLogger(PROGRESS_LOGGER).setLevel(logging.INFO if verbosity >= 0 else level)


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


def kinds(counts: Mapping[str, int]) -> str:
    """``KeyError 2, TypeError 1``: counts by name, the largest first (then by name)."""
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))


def _reasons(counts: Mapping[str, int]) -> str:
    if not counts:
        return "0"
    parts = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items(), key=lambda x: -x[1]))
    return f"{sum(counts.values())} ({parts})"


def print_summary(report: CrawlReport, out: TextIO, *, worker: bool = False) -> None:
    """Write the end-of-crawl summary as plain ``key: value`` lines.

    ``worker``: the report of ``crawlq worker``, for which a stop is the normal end (the job
    goes on with its other workers), not an interruption.
    """
    c, s = report.counters, report.store
    rate = c.pages / report.elapsed_s if report.elapsed_s > 0 else 0.0
    ended = {
        "done": "crawl finished: nothing left to crawl",
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
        f"pages stored: {c.pages} this run, {s.pages} in store",
        f"items: {c.items} this run, {s.items} in store"
        if report.full_counters
        else f"items: {s.items} in store",
        f"dead-lettered: {_reasons(s.dead_by_reason)}"
        + ("; --retry-dead requeues them" if s.dead else ""),
        f"filtered: {_reasons(s.filtered_by_reason)}",
    ]
    if report.replayed:
        lines.append(f"dead letters replayed first (--retry-dead): {report.replayed}")
    if s.spider_errors or c.spider_errors:
        this_run = f"{sum(c.spider_errors.values())} this run, " if report.full_counters else ""
        lines.append(
            f"spider errors: {this_run}{s.spider_errors} in store"
            + (f" ({kinds(s.spider_errors_by_type)})" if s.spider_errors else "")
        )
    if report.full_counters:  # else each worker process printed its own
        lines += [
            f"links not followed: {_reasons(c.skipped)}",
            f"retries: {c.retries}",
            f"frontier round trips: {c.round_trips}"
            + (f" ({c.round_trips / c.pages:.2f} per page)" if c.pages else ""),
        ]
    if report.frontier.over_budget:
        lines.append(
            f"over max_pages_per_host: {report.frontier.over_budget} links not queued "
            "(their host had its budget of URLs)"
        )
    lines += [
        f"queued: {report.frontier.queued}, delayed: {report.frontier.delayed}, "
        f"in flight: {report.frontier.in_flight}",
        f"elapsed: {report.elapsed_s:.1f}s, {rate:.1f} pages/s",
    ]
    out.write("\n".join(lines) + "\n")


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
        ("stored pages", "?" if stored is None else stored),
        ("pages/s (last minute)", "?" if rate is None else f"{rate:.1f}"),
        ("live workers", "? (celery inspect ping)" if celery else len(report.get("workers", []))),
    ):
        table.add_row(name, str(value))
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
    """``crawlq inspect``'s story as a table (see `crawlq.engine.story`)."""
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
    """``crawlq dead list`` as a table (rows of `crawlq.engine.dead.DeadRow.to_json`)."""
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
