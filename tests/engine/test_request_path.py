"""docs/architecture.md's request path is the one a profiled crawl takes (`bench/request_path.py`).

Structure, not speed: the files a crawl of a generated site calls at start-up and per page,
above L0, in the order of their first calls, must be the lists the document gives.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from tests.unit.test_layers import LAYERS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
SECTION = "## One request's path, file by file"


def _bench() -> ModuleType:
    source = ROOT / "bench" / "request_path.py"
    spec = importlib.util.spec_from_file_location("request_path", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def documented() -> tuple[list[str], list[str]]:
    """The start-up files (the paragraph opening **Start-up**) and the per-URL numbered list."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    paragraph = section[section.index("**Start-up**") :]
    paragraph = paragraph[: paragraph.index("\n\n")]
    startup = re.findall(r"`([\w/]+\.py)`", paragraph)
    per_url = re.findall(r"^\d+\. `([\w/]+\.py)`", section, flags=re.MULTILINE)
    return startup, per_url


def test_the_bench_leaves_out_what_the_layer_test_calls_l0() -> None:
    bench = _bench()
    assert sorted(bench.L0) == sorted(name for name, layer in LAYERS.items() if layer == 0)


def test_the_documented_path_is_the_measured_one() -> None:
    path = _bench().measure(pages=60)
    startup, per_url = documented()
    assert path.windows >= 50  # every page of the site was crawled, one window each
    assert path.per_page == per_url
    assert path.startup == startup
