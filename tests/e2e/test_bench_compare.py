"""Smoke test of ``bench/compare.py``'s harness on a four-page site (issue 25's additions).

Not a benchmark: nothing here is timed. It runs the harness as a user would, one round of
the crawlq embedded, bare-loop and fetch-only rows, inside a port window, on a corpus given
as a directory with a symlinked page and as a tarball that also holds a link out of the
corpus, and checks from the JSON dump that every run was valid with the right pages and
carries the machine's speed and load. The Scrapy and Crawlee rows are left out: each needs a
venv installed from the package index (`bench/_venvs.py`), which a test should not make.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = {
    "index.html": '<title>i</title><a href="a.html">a</a> <a href="b.html">b</a>'
    '<a href="sub/c.html">c</a>',
    "a.html": '<title>a</title><a href="index.html">up</a>',
    "sub/c.html": '<title>c</title><a href="../b.html">b</a>',
}


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    for name, html in PAGES.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(f"<html><head></head><body>{html}</body></html>")
    (site / "b.html").symlink_to("sub/c.html")  # a page that is a symlink inside the corpus
    return site


def _run_compare(tmp_path: Path, corpus: Path, name: str) -> tuple[str, list[dict]]:
    dump = tmp_path / f"{name}.json"
    cmd = [sys.executable, str(REPO / "bench" / "compare.py"), "--corpus", str(corpus)]
    cmd += ["--expect", "4", "--rounds", "1", "--rows", "embedded", "bare", "fetch"]
    cmd += ["--port-range", "18950-18999", "--aiohttp", "--json", str(dump)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads(dump.read_text())["runs"]


@pytest.mark.parametrize("form", ["directory", "tarball"])
def test_compare_runs_the_new_rows_on_a_tiny_site(tmp_path: Path, form: str) -> None:
    site = _site(tmp_path)
    corpus = site
    if form == "tarball":
        os.symlink("/etc/hostname", site / "outside.html")  # must be skipped, not served
        corpus = tmp_path / "site.tar.xz"
        with tarfile.open(corpus, "w:xz") as archive:
            archive.add(site, arcname="site")
    out, runs = _run_compare(tmp_path, corpus, form)
    by_row = {r["row"]: r for r in runs}
    assert set(by_row) == {"crawlq embedded", "bare loop", "fetch only"}
    for run in runs:
        assert run["valid"], run
        assert run["pages"] == 4
        assert run["speed_ms"] > 0 and run["loadavg"] >= 0
    port = int(out.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
    assert 18950 <= port <= 18999
    assert "python3 -m timeit 'sum(range(10**6))':" in out
    if form == "tarball":
        assert "1 link(s) out of it skipped" in out
