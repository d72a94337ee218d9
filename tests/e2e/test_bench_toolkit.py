"""Smoke test of ``bench/toolkit.py`` (issue 22's benchmark) on a three-page site.

Not a benchmark: nothing here is timed. It runs the harness as a user would, one round of
both engines (embedded and 2 Redis workers) on a site of three pages, and checks from the
harness's JSON dump that every run was counted valid with the right pages and items, so a
change that breaks the harness (an option the crawl no longer takes, an export that no longer
reads back) fails here and not on the day of a benchmark run.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.conftest import REPO

PAGES = {
    "index.html": "<title>Chapter 2. The SQL Language</title><h1>SQL</h1>"
    '<p>one two three</p><a href="a.html">a</a> <a href="b.html">b</a>',
    "a.html": "<title>7.8.  WITH\n Queries</title><h1>WITH</h1><h1>x</h1>"
    '<a href="index.html">up</a>',
    "b.html": "<title>About</title><p>no section here</p>",
}


def _tiny_corpus(tmp_path: Path) -> Path:
    site = tmp_path / "tiny"
    site.mkdir()
    for name, html in PAGES.items():
        (site / name).write_text(f"<html><head></head><body>{html}</body></html>")
    tarball = tmp_path / "tiny.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(site, arcname="tiny")
    return tarball


def _toolkit_importable() -> bool:
    """Whether this install can run the pydantic variant (pydantic and issue 22's items)."""
    return all(importlib.util.find_spec(m) is not None for m in ("pydantic", "crawlq.items"))


def test_toolkit_bench_runs_both_engines_on_a_tiny_site(tmp_path: Path, redis_url: str) -> None:
    dump = tmp_path / "runs.json"
    cmd = [
        sys.executable,
        str(REPO / "bench" / "toolkit.py"),
        "--corpus",
        str(_tiny_corpus(tmp_path)),
    ]
    cmd += ["--expect", "3", "--rounds", "1", "--engines", "embedded", "workers2", "--aiohttp"]
    cmd += ["--variants", "default", "dict", "pydantic", "--redis", redis_url, "--json", str(dump)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = {r["row"]: r for r in json.loads(dump.read_text())["runs"]}
    expected = [f"crawlq {e} {v}" for e in ("embedded", "workers2") for v in ("default", "dict")]
    if _toolkit_importable():
        expected += ["crawlq embedded pydantic", "crawlq workers2 pydantic"]
    else:
        assert "variant pydantic: skipped (ModuleNotFoundError: No module named" in proc.stdout
    assert sorted(runs) == sorted(expected)
    for row, run in runs.items():
        assert run["valid"], (row, run["note"])
        assert (run["pages"], run["records"]) == (3, 3), row
        # one item per page, and the section of the two numbered titles ("2", "7.8");
        # the default spider yields none
        items, sections = (0, 0) if row.endswith(" default") else (3, 2)
        assert (run["extra"]["items"], run["extra"]["item_records"]) == (items, items), row
        assert run["extra"]["sections"] == sections, row
        assert run["run"]["cpu_s"] > 0, row
    assert runs["crawlq workers2 dict"]["redis_cpu_s"] is not None
