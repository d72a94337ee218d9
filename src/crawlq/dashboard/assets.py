"""The dashboard's stylesheet and script, served as ``/static/dashboard.css`` and ``.js``.

Plain text constants, no build step. The script refreshes the job panels every
``data-refresh-s`` seconds (``/panel``) and runs the search box (``/inspect``); the Content
Security Policy of `crawlq.dashboard.access` allows only these same-origin files.
"""

from __future__ import annotations

__all__ = ["CSS", "JS"]

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
