"""Smoke test of ``bench/synthetic.py --memory`` (issue 25's memory rows) at a tiny size.

Not a benchmark: nothing here is timed or compared. Three big pages of under a megabyte and
a generated site of 300 pages on two hosts, crawled once by crawlq and by the bare loop:
every run must be valid (exactly the reachable pages) and the memory table must come out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_memory_rows_run_on_a_tiny_big_page_site_and_generated_site(tmp_path: Path) -> None:
    dump = tmp_path / "memory.json"
    cmd = [sys.executable, str(REPO / "bench" / "synthetic.py"), "--memory", "--pages", "300"]
    cmd += ["--hosts", "2", "--big-pages", "3", "--big-mb", "0.3-0.6", "--json", str(dump)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = json.loads(dump.read_text())["runs"]
    seen = {(r["label"].split(" #")[0], r["row"]): r for r in runs}
    assert set(seen) == {
        ("big pages: 3 x 0.3-0.6 MB", "crawlq embedded"),
        ("big pages: 3 x 0.3-0.6 MB", "bare loop"),
        ("N=300 H=2", "crawlq embedded"),
        ("N=300 H=2", "bare loop"),
    }
    for (label, _row), run in seen.items():
        assert run["valid"], run
        assert run["pages"] == (4 if label.startswith("big") else 300)
    assert "memory: peak RSS of any one crawler process" in proc.stdout
