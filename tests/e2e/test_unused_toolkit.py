"""An unused toolkit loads none of its heavy imports (issue 22: cheap when unused).

A crawl whose spider yields dicts, with no item type, pipeline, middleware or proxy, must not
import itemadapter (which imports pydantic when installed), parsel (forms,
selectors) or aiohttp-socks: each is tens of milliseconds and megabytes per process, paid by
every worker (`bench/RESULTS.md`, 2026-12-02 19:00). Each crawl runs in a fresh interpreter
(the CLI's ``main`` in-process, against a loopback site served from a thread) that prints the
modules it loaded; the typed-item crawl shows that the check sees an import when there is one.
Nothing is timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

HEAVY = ("itemadapter", "pydantic", "parsel", "lxml", "aiohttp_socks", "python_socks")

SPIDERS = """
from dataclasses import dataclass

from crawlq.spider import Spider


class DictSpider(Spider):
    name = "dicts"

    def parse(self, response):
        yield {"url": response.url, "title": response.title}
        yield from response.follow_all()


@dataclass
class Page:
    url: str
    title: str | None


class TypedSpider(Spider):
    name = "typed"

    def parse(self, response):
        yield Page(response.url, response.title)
        yield from response.follow_all()
"""

RUN = """
import json, sys
from crawlq.testing.static import make_static_app
from crawlq.testing.thread import ServerThread

site, spider, store, out, names = sys.argv[1:6]
with ServerThread(make_static_app(site)) as server:
    from crawlq.cli import main

    sys.argv = ["crawlq", "crawl", server.base_url + "/index.html", "--spider", spider,
                "--store", store, "--delay", "0"]
    try:
        main()
    except SystemExit as exc:
        code = exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(names)))
with open(out, "w") as f:
    json.dump({"code": code, "heavy": heavy}, f)
"""


def _crawl(tmp_path: Path, spider: str) -> dict[str, object]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "index.html").write_text(
        '<html><head><title>Home</title></head><body><a href="a.html">a</a></body></html>'
    )
    (site / "a.html").write_text("<html><head><title>A</title></head><body>a</body></html>")
    (tmp_path / "spiders.py").write_text(SPIDERS)
    out = tmp_path / f"{spider}.json"
    cmd = [sys.executable, "-c", textwrap.dedent(RUN), str(site)]
    cmd += [f"{tmp_path / 'spiders.py'}:{spider}", str(tmp_path / f"{spider}.db"), str(out)]
    cmd.append(json.dumps(HEAVY))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and out.exists(), proc.stdout + proc.stderr
    result: dict[str, object] = json.loads(out.read_text())
    assert result["code"] in (0, None), proc.stdout + proc.stderr
    return result


def test_a_dict_crawl_imports_no_toolkit_dependency(tmp_path: Path) -> None:
    assert _crawl(tmp_path, "DictSpider")["heavy"] == []


def test_a_typed_item_loads_itemadapter_when_it_appears(tmp_path: Path) -> None:
    assert "itemadapter" in _crawl(tmp_path, "TypedSpider")["heavy"]  # type: ignore[operator]
