"""The dashboard's page: server-rendered HTML with inline SVG charts, its stylesheet and script.

Everything shown that comes from shared state or web input (job names, hosts, reasons,
worker ids, URLs) is HTML-escaped. Elements that carry a number have a class naming it
(``queued``, ``pages-per-s``…) and the job in ``data-job``, for scripts and tests.

`CSS` and `JS` are plain text constants, no build step, served as ``/static/dashboard.css``
and ``.js``. The script refreshes the job panels every ``data-refresh-s`` seconds
(``/panel``) and runs the search box (``/inspect``); the Content Security Policy of
`crawlq.dashboard.app` (`SECURITY_HEADERS`) allows only these same-origin files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from crawlq.dashboard.history import JobWatch
from crawlq.dashboard.lookup import Lookup

__all__ = ["CSS", "JS", "page", "panel", "search_result", "sparkline"]

_NOW = (
    ("queue", "queued"),
    ("in_flight", "in flight"),
    ("delayed", "delayed (retries)"),
    ("dead", "dead"),
    ("seen", "seen"),
    ("done", "done"),
    ("stored", "stored pages"),
    ("retries", "retries so far"),
    ("pages_per_s", "pages/s (last minute)"),
)


def sparkline(values: Sequence[float | None], *, width: int = 320, height: int = 64) -> str:
    """An inline SVG line of ``values`` (None: no reading), scaled to its own maximum."""
    points = [v for v in values if v is not None]
    top = max(points, default=0.0) or 1.0
    step = width / max(1, len(values) - 1)
    coords = " ".join(
        f"{i * step:.1f},{height - (v / top) * (height - 4) - 2:.1f}"
        for i, v in enumerate(values)
        if v is not None
    )
    return (
        f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}"'
        f' role="img"><polyline fill="none" stroke="currentColor" stroke-width="1.5"'
        f' points="{coords}"/><text x="2" y="11">max {_num(max(points, default=0.0))}</text></svg>'
    )


def _num(value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _table(title: str, head: Sequence[str], rows: Iterable[Sequence[Any]], cls: str) -> str:
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(_num(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    if not body:
        body = f'<tr><td colspan="{len(head)}">none</td></tr>'
    heads = "".join(f"<th>{escape(h)}</th>" for h in head)
    return (
        f'<table class="{cls}"><caption>{escape(title)}</caption>'
        f"<thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table>"
    )


def _job(w: JobWatch) -> str:
    job = escape(w.job)
    if w.report is None:
        why = escape(w.error or "not read yet")
        return f'<section class="job" data-job="{job}"><h2>job {job}</h2><p>{why}</p></section>'
    r = dict(w.report)
    celery = r.get("engine") == "celery"
    r["queue"] = r.get("pending") if celery else r.get("queued")
    now = "".join(
        f"<dt>{escape('pending (queued or running)' if key == 'queue' and celery else label)}"
        f'</dt><dd class="{key.replace("_", "-")}" data-job="{job}">{escape(_num(r.get(key)))}</dd>'
        for key, label in _NOW
    )
    samples = list(w.samples)
    charts = "".join(
        f"<figure><figcaption>{escape(title)}</figcaption>{sparkline(values)}</figure>"
        for title, values in (
            ("queue length", [float(s.queue) for s in samples]),
            ("pages/s", [s.pages_per_s for s in samples]),
            ("errors (dead letters)/s", [s.dead_per_s for s in samples]),
            ("retries/s", [s.retries_per_s for s in samples]),
        )
    )
    dead = sorted(w.dead_by_reason.items(), key=lambda kv: -kv[1])
    tables = "".join(
        (
            _table("dead letters by reason", ("reason", "URLs"), dead, "dead-reasons"),
            _table(
                "busiest hosts",
                ("host", "queued", "in flight"),
                ((h["host"], h["queued"], h["in_flight"]) for h in r.get("hosts") or ()),
                "busiest",
            ),
            _table(
                "slowest hosts (mean fetch time)",
                ("host", "ms", "pages"),
                ((h.host, f"{h.mean_ms:.1f}", h.pages) for h in w.slowest()),
                "slowest",
            ),
            _table(
                "hosts in backoff",
                ("host", "state", "429/503", "failures", "until"),
                (
                    (b["host"], b["state"], b["pushbacks"], b["failures"], b["until"])
                    for b in r.get("backoff") or ()
                ),
                "backoff",
            ),
            _table(
                "live workers",
                ("worker", "last heartbeat (s ago)"),
                ((x["id"], x["last_seen_s"]) for x in r.get("workers") or ()),
                "workers",
            ),
        )
    )
    stale = f'<p class="error">{escape(w.error)}</p>' if w.error else ""
    engine = " (Celery engine)" if celery else ""
    paused = (
        f' <span class="state paused" data-job="{job}">paused</span>' if r.get("paused") else ""
    )
    return (
        f'<section class="job" data-job="{job}"><h2>job {job}{engine}{paused}</h2>{stale}'
        f'<dl class="now">{now}</dl><div class="charts">{charts}</div>'
        f'<div class="tables">{tables}</div></section>'
    )


def _notices(watches: Sequence[JobWatch]) -> str:
    """One line per paused job, shown above every job's section."""
    lines = []
    for w in watches:
        if w.report is not None and w.report.get("paused"):
            job = escape(w.job)
            lines.append(
                f'<p class="notice paused" data-job="{job}">job {job} is paused: its workers'
                f" lease nothing until <code>crawlq job resume {job}</code></p>"
            )
    return "".join(lines)


def panel(watches: Sequence[JobWatch]) -> str:
    """The paused jobs' notices, then the jobs' sections.

    What the page's script swaps in at each refresh.
    """
    if not watches:
        return "<p>no jobs on this frontier</p>"
    return _notices(watches) + "".join(_job(w) for w in watches)


def search_result(result: Lookup) -> str:
    """The search box's answer as an HTML fragment."""
    if result.error is not None:
        return f'<p class="error">{escape(result.error)}</p>'
    title = f"inspect {result.query}" + (f" in job {result.job}" if result.job else "")
    return _table(title, ("", ""), result.fields, "inspect")


def page(
    watches: Sequence[JobWatch],
    jobs: Sequence[str],
    refresh_s: float,
    found: Lookup | None = None,
) -> str:
    """The whole page; ``found``: the answer to a search given in its URL (``?q=…&job=…``)."""
    chosen = found is not None and found.job
    options = "".join(
        f'<option value="{escape(j)}"{" selected" if j == chosen else ""}>{escape(j)}</option>'
        for j in jobs
    )
    answer = "" if found is None else search_result(found)
    typed = "" if found is None else escape(found.query)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>crawlq dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="static/dashboard.css"></head>
<body data-refresh-s="{refresh_s:g}">
<header><h1>crawlq</h1>
<form id="search" action="" method="get">
<input name="q" type="search" placeholder="a URL: where it is in the job, what came of it"
 size="60" value="{typed}" required>
<select name="job">{options}</select><button type="submit">inspect</button></form>
<div id="inspect">{answer}</div></header>
<main id="jobs">{panel(watches)}</main>
<script src="static/dashboard.js"></script>
</body></html>
"""


CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #222; }
header { display: flex; flex-wrap: wrap; gap: 0.5em 2em; align-items: center; }
#inspect { flex-basis: 100%; }
.notice.paused { background: #fff4d6; border: 1px solid #e0b84c; padding: 4px 8px; }
.state.paused { background: #e0b84c; color: #222; font-size: 14px; padding: 1px 6px; }
section.job { border-top: 2px solid #ccc; margin-top: 1em; }
dl.now { display: grid; grid-template-columns: repeat(9, auto); gap: 0 1em; }
dl.now dt { grid-row: 1; color: #666; font-size: 12px; }
dl.now dd { grid-row: 2; margin: 0; font-size: 20px; }
.charts, .tables { display: flex; flex-wrap: wrap; gap: 1em 2em; align-items: flex-start; }
figure { margin: 0.5em 0; } figcaption { color: #666; font-size: 12px; }
svg.spark { background: #f6f6f6; color: #2a6; } svg.spark text { font-size: 9px; fill: #888; }
table { border-collapse: collapse; } caption { text-align: left; color: #666; }
td, th { padding: 1px 8px; border-bottom: 1px solid #eee; text-align: left; }
.error { color: #b00; }
"""

JS = """
(function () {
  const refreshS = parseFloat(document.body.dataset.refreshS) || 2;
  const jobs = document.getElementById("jobs");
  async function refresh() {
    try {
      const r = await fetch("panel", {credentials: "same-origin"});
      if (r.ok) { jobs.innerHTML = await r.text(); }
    } catch (e) { /* the next refresh tries again */ }
    setTimeout(refresh, refreshS * 1000);
  }
  setTimeout(refresh, refreshS * 1000);
  const form = document.getElementById("search");
  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    const query = new URLSearchParams(new FormData(form));
    const r = await fetch("inspect?" + query.toString(), {credentials: "same-origin"});
    document.getElementById("inspect").innerHTML = await r.text();
  });
})();
"""
