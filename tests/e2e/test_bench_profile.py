"""Smoke test of ``bench/profile_stages.py`` on a three-page site, with cProfile.

Not a benchmark: nothing here is timed. It checks that both crawlers run under the probe,
that every page is counted and that the stage table comes out (with the JSON dump), so a
change that breaks the profile command fails here and not on the day it is needed. cProfile
rather than py-spy: it needs nothing installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_profile_stages_runs_both_crawlers_on_a_tiny_site(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text('<title>i</title><a href="a.html">a</a><a href="b.html">b</a>')
    (site / "a.html").write_text('<title>a</title><a href="b.html">b</a>')
    (site / "b.html").write_text("<title>b</title>")
    dump = tmp_path / "profile.json"
    cmd = [sys.executable, str(REPO / "bench" / "profile_stages.py"), "--corpus", str(site)]
    cmd += ["--crawls", "1", "--tool", "cprofile", "--aiohttp", "--json", str(dump)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tables = json.loads(dump.read_text())["crawlers"]
    assert set(tables) == {"crawlq", "bare"}
    for table in tables.values():
        assert table["pages"] == 3
        assert table["us_per_page"]["fetch"] > 0
        assert table["us_per_page"]["start-up (imports)"] > 0
    assert "| fetch |" in proc.stdout
    assert "python3 -m timeit 'sum(range(10**6))':" in proc.stdout
